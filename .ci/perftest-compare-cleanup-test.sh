#!/usr/bin/env bash
# Checks that benchmarks/perftest-compare.sh leaves nothing behind when it is stopped mid-run: in
# each round an interleaved comparison (pairs pt-vp pt-pt: perftest servers and clients, a
# verbs-perf server JVM under `timeout`, named pipes) is started and, once the JVM is stopped
# between its runs (SIGSTOP, state T), the script gets SIGTERM (round 1) or SIGINT (round 2, as a
# Ctrl-C would send it). Then the script must have exited with 143 / 130, and no verbs-perf JVM,
# no ib_* process, no `timeout`, no stopped process and no named-pipe folder may remain.
#
#   .ci/perftest-compare-cleanup-test.sh    (in a Soft-RoCE guest, or on a host with an RDMA
#                                            device and nothing else of perftest's running;
#                                            .ci/run's perf-modes tier runs it in its guest; ~2 min)
#
# Exit status: 0 when both rounds leave nothing; 1 otherwise. Logs in target/perf-tier-cleanup/.
# PERFTEST_COMPARE (default benchmarks/perftest-compare.sh): the script under test, e.g. an older
# copy beside it, to see this test fail.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
OUT="$ROOT/target/perf-tier-cleanup"  # made afresh by checks.sh
CHECK_NAME=cleanup-test
# shellcheck source=checks.sh
. "$ROOT/.ci/checks.sh"
leftovers() { # prints what of perftest-compare.sh's still runs (nothing: none)
    local p
    pgrep -a -f 'org\.verbs4j\.perf\.VerbsPerf' || true
    pgrep -a -f '(^|[ /])ib_(write|send|read|atomic)_(bw|lat)( |$)' || true
    pgrep -a -x timeout || true
    for p in /proc/[0-9]*; do
        [[ "$(awk '{ print $3 }' "$p/stat" 2>/dev/null)" != T ]] || echo "stopped: ${p#/proc/} $(tr '\0' ' ' <"$p/cmdline" 2>/dev/null)"
    done
    find "${TMPDIR:-/tmp}" -maxdepth 1 -name 'perftest-compare-fifo.*' 2>/dev/null || true
}
stopped_jvm() { # a verbs-perf JVM in state T
    local p
    for p in $(pgrep -f 'org\.verbs4j\.perf\.VerbsPerf'); do
        [[ "$(awk '{ print $3 }' "/proc/$p/stat" 2>/dev/null)" != T ]] || return 0
    done
    return 1
}

round() { # NAME SIGNAL EXPECTED-STATUS
    local name="$1" sig="$2" want="$3" pc rc=0 i
    check "$name: nothing of perftest-compare.sh's running before" test -z "$(leftovers)"
    env --default-signal=INT "$PC" --tests write_lat --pairs 'pt-vp pt-pt' \
        --lat-sizes '2 4096' --lat-iters 50 --repeats 3 --settle 0 --timeout 60 --interleave \
        --out "$OUT/$name" >"$OUT/$name.log" 2>&1 &
    pc=$!
    for ((i = 0; i < 900; i++)); do
        stopped_jvm && break
        kill -0 "$pc" 2>/dev/null || break
        sleep 0.2
    done
    check "$name: a verbs-perf JVM stopped between its runs (within 180 s)" stopped_jvm
    pgrep -a -f 'VerbsPerf|ib_(write|send|read|atomic)_|^timeout|perftest-compare.sh' >"$OUT/$name.ps-before" || true
    say "$name: $(wc -l <"$OUT/$name.ps-before") processes of the comparison; SIG$sig to perftest-compare.sh (pid $pc)"
    kill -"$sig" "$pc"
    # the trap runs once the foreground command returns (at most its --timeout, 60 s)
    for ((i = 0; i < 600; i++)); do
        kill -0 "$pc" 2>/dev/null || break
        sleep 0.2
    done
    wait "$pc" || rc=$?
    say "$name: perftest-compare.sh exited with status $rc"
    sleep 1
    leftovers >"$OUT/$name.leftovers"
    check "$name: exit status $want" test "$rc" = "$want"
    check "$name: nothing left (no JVM, ib_*, timeout, stopped process or pipe folder)" test ! -s "$OUT/$name.leftovers"
    [[ ! -s "$OUT/$name.leftovers" ]] || sed 's/^/    left: /' "$OUT/$name.leftovers"
    check "$name: the script said what it ended" grep -q 'ending [0-9]* process(es) it started' "$OUT/$name.log"
}

PC="${PERFTEST_COMPARE:-benchmarks/perftest-compare.sh}"
say "script under test: $PC"
for jar in perf/target/verbs-perf.jar benchmarks/target/verbs4j-benchmarks.jar; do
    [[ -s $jar ]] || { say "no $jar"; exit 1; }
done
round sigterm TERM 143
round sigint INT 130
checks_done
