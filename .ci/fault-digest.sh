#!/usr/bin/env bash
# Prints a short account of a fault-tier run (softroce/two-hosts-fault.sh) from what it left in
# DIR (default target/fault-tier; target/fault-tier-netty for its --scenario netty): the script's
# own lines (fault.log), then for each guest's console (B: the client, A: the server, A2: the
# restarted server) its FAIL and exception lines, a JVM watchdog's thread dump if one fired, its
# last lines, and the warnings of the guest's dmesg.
#
#   .ci/fault-digest.sh [DIR]    (.ci/run calls it at its end when the fault tier failed, so that
#                                 the tail of CI's log says where the run went wrong)
#
# Exit status: 0 always (a digest, not a verdict).
set -uo pipefail
DIR="${1:-target/fault-tier}"
clean() { tr -d '\r' | sed 's/[^[:print:]\t]//g'; }
if [[ -f "$DIR/fault.log" ]]; then
    echo "----- the fault script's own lines ($DIR/fault.log)"
    clean <"$DIR/fault.log"
else
    echo "----- no $DIR/fault.log (the fault script stopped before it made $DIR?)"
fi
for g in B A A2; do
    f="$DIR/$g-console.log"
    [[ -f "$f" ]] || continue
    echo "----- guest $g ($f, $(wc -l <"$f") lines): FAIL and exception lines (at most 15)"
    grep -a -E 'FAIL|Exception|Error:|ERROR' "$f" | grep -av 'WR_FLUSH_ERR\|RETRY_EXC_ERR' | head -n 15 | clean
    if grep -aq 'WATCHDOG' "$f"; then
        echo "----- guest $g: its JVM's watchdog (at most 80 lines)"
        sed -n '/WATCHDOG/,$p' "$f" | head -n 80 | clean
    fi
    n=$([[ $g == B ]] && echo 25 || echo 10)
    echo "----- guest $g: its last $n lines before the guest's dmesg"
    sed '/^===== guest dmesg =====/,$d' "$f" | tail -n "$n" | clean
    if grep -aq '^===== guest dmesg =====' "$f"; then
        echo "----- guest $g: its dmesg's warnings (at most 10)"
        sed -n '/^===== guest dmesg =====/,$p' "$f" |
            grep -a -i -E '\b(warning|bug:|oops|errors?|fail(ed|ure)?|hung|soft lockup|stall|timed out|call trace|watchdog)\b' |
            grep -av -i -E 'not a bug|report a bug|NMI watchdog permanently disabled' | head -n 10 | clean
    fi
done
exit 0
