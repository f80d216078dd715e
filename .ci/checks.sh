# shellcheck shell=bash
# Sourced by .ci's test scripts (guest-boot-test.sh, perftest-compare-cleanup-test.sh): progress
# lines, one verdict line per check, and the exit status. The sourcing script sets CHECK_NAME (its
# progress lines' prefix) and OUT (its output folder, emptied here) first and ends with checks_done.
rm -rf "${OUT:?}"
mkdir -p "$OUT"
T0=$SECONDS
FAILED=0
say() { echo "[$CHECK_NAME +$((SECONDS - T0))s] $*"; }
check() { # WHAT CONDITION...: "ok: WHAT" if the condition holds, else "FAILED: WHAT" (and the exit status 1)
    local what="$1"
    shift
    if "$@"; then say "ok: $what"; else say "FAILED: $what"; FAILED=1; fi
}
checks_done() { # the last line, and the exit status: 0 only if every check held
    say "done in $((SECONDS - T0))s: $([[ $FAILED == 0 ]] && echo all passed || echo FAILED)"
    exit "$FAILED"
}
