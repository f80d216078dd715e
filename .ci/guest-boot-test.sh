#!/usr/bin/env bash
# Checks softroce/run-in-guest.sh's boot handling in three short guest boots:
#   1. a first boot that panics before the command (VERBS4J_GUEST_FIRST_BOOT_ARGS=rdinit=/none) is
#      booted once more, with "guest died before the command started (...); retrying once" on
#      stderr, and the command then runs with the emulated-guest kernel arguments (no_timer_check,
#      lpj=) and its exit status comes back;
#   2. a guest that panics on every boot is booted twice, not more, and fails with 125;
#   3. a guest that dies after its command started (a panic: sysrq c) is not booted again and
#      fails with 125;
#   4. a boot that has not started its command within VERBS4J_GUEST_START_BOUND (here 2 s, less
#      than any boot takes: the case of an emulator hung before the kernel prints) is stopped,
#      booted once more, stopped again, and fails with 125 long before --timeout.
#
#   .ci/guest-boot-test.sh    (.ci/run's boot tier; ~1-2 minutes under TCG)
#
# Exit status: 0 when all four behave so; 1 otherwise. Consoles in target/boot-test/.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
OUT="$ROOT/target/boot-test"  # made afresh by checks.sh
CHECK_NAME=boot-test
# shellcheck source=checks.sh
. "$ROOT/.ci/checks.sh"
RETRY_LINE='guest died before the command started (.*); retrying once'
retries() { grep -c -E "$RETRY_LINE" "$1" || true; }

guest() { # CASE COMMAND [VAR=VALUE...]: one run-in-guest.sh; its status in RC, its stderr in OUT/CASE.err
    local name="$1" cmd="$2"
    shift 2
    RC=0
    env "$@" VERBS4J_GUEST_LOG="$OUT/$name-console.log" \
        softroce/run-in-guest.sh --timeout 180 --share "$ROOT" -- "$cmd" \
        >"$OUT/$name.out" 2> >(tee "$OUT/$name.err" >&2) || RC=$?
    # (the stderr tee finishes before the checks read its file)
    sleep 0.5
    say "$name: exit status $RC, $(retries "$OUT/$name.err") retry line(s)"
}

say "1. first boot panics, second boot runs the command"
guest first-boot-panics \
    'grep -qw no_timer_check /proc/cmdline && grep -q "lpj=[1-9]" /proc/cmdline && dmesg | grep -q "Calibrating delay loop (skipped) preset value" && exit 7; cat /proc/cmdline; exit 1' \
    VERBS4J_GUEST_FIRST_BOOT_ARGS=rdinit=/none
check "the command's status (7: kernel arguments no_timer_check and lpj= in effect) after one retry" test "$RC" = 7
check "exactly one retry line" test "$(retries "$OUT/first-boot-panics.err")" = 1
check "the retry line names the panic" grep -q -E 'guest died before the command started \(Kernel panic - not syncing' "$OUT/first-boot-panics.err"
check "the first boot's console kept" grep -q 'Kernel panic' "$OUT/first-boot-panics-console.log.first-boot"

say "2. every boot panics"
guest every-boot-panics 'exit 0' VERBS4J_GUEST_KERNEL_ARGS=rdinit=/none
check "exit status 125 (no status from the guest)" test "$RC" = 125
check "exactly one retry line (two boots, not more)" test "$(retries "$OUT/every-boot-panics.err")" = 1

say "3. the command starts, then the guest dies"
guest dies-after-start 'echo the command started; sync; echo c >/proc/sysrq-trigger; sleep 60'
check "exit status 125" test "$RC" = 125
check "the command ran" grep -q 'the command started' "$OUT/dies-after-start.out"
check "no retry" test "$(retries "$OUT/dies-after-start.err")" = 0

say "4. no boot starts its command within the start bound"
t0=$SECONDS
guest start-bound 'exit 0' VERBS4J_GUEST_START_BOUND=2
check "exit status 125" test "$RC" = 125
check "exactly one retry line, naming the start bound" \
    test "$(grep -c -E 'guest died before the command started \(no command start within 2s' "$OUT/start-bound.err" || true)" = 1
check "the failure names the start bound" grep -q 'did not start the command within 2s' "$OUT/start-bound.err"
check "ended well before --timeout 180 ($((SECONDS - t0))s)" test $((SECONDS - t0)) -lt 60

checks_done
