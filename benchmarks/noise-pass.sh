#!/usr/bin/env bash
# noise-pass.sh — on demand, not in CI: verbs-perf against perftest judged against perftest's own
# noise, in one fresh Soft-RoCE guest (softroce/run-in-guest.sh, multi-threaded TCG, the guest's
# clock from the TSC). About 20 minutes on a quiet 2-core machine, up to twice that on a busy one.
#
# Usage: benchmarks/noise-pass.sh [--guest-timeout SECONDS] [perftest-compare.sh options]
#   --guest-timeout S  bound on the guest, boot included (default 3600)
#   other options go to benchmarks/perftest-compare.sh after the pass's own, so they win
#   (e.g. --tests 'write_lat send_lat' for a shorter pass, --out DIR, --png DIR)
#
# What it runs (benchmarks/perftest-compare.sh, see its header):
#   every test (write_bw send_bw read_bw atomic_bw write_lat send_lat read_lat atomic_lat), the
#   bandwidth tests at 4 and 64 KiB for 4 s each (-D 4 -f 1), the latency tests at 2 B and 4 KiB
#   (-n 20000; the atomics at their 8 B), both directions, perftest against itself around them;
#   --interleave: run by run, the pairs pt-pt vp-pt pt-pt.ctl pt-vp pt-pt.2 in turn, so that
#   perftest's two runs bracket each verbs-perf run seconds apart; pt-pt.ctl is perftest against
#   itself a third time, judged by the same rule as verbs-perf (the control: how often perftest
#   lands outside its own band); --warm-runs 1: each run after an identical discarded one;
#   --repeats 2: every measured run twice, in two passes, each pair's best run of a row counts.
#   Each verbs-perf run starts once its JVM's JIT compiler is idle (perftest-compare.sh --settle).
#
# Output: the ratio table, each row said to lie within perftest's own noise or not, then "Within
# perftest's own noise: K of M rows", the direction of verbs-perf's rows (a sign test) and the
# control's count by the same rule; the runs, JSON reports, conditions and the report
# (compare.txt) in target/perf-noise/ (or --out DIR), with a stamp of date, machine and command
# (meta.json, by benchmarks/results.py stamp, which renders the folder into docs/results.md).
# Exit status: perftest-compare.sh's (non-zero when a run fails or its numbers do not parse; a row
# outside the noise is reported, not a failure: the emulator's timing is not the hardware's).
# Environment: VERBS4J_PERF_RETRIES (default 3: each run tried 4 times; perftest under TCG fails
# its clock calibration now and then), and the VERBS4J_PERF_* and VERBS4J_GUEST_* variables of
# perftest-compare.sh and softroce/run-in-guest.sh.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
GUEST_TIMEOUT=3600
if [[ "${1:-}" == --guest-timeout ]]; then
    GUEST_TIMEOUT="${2:?--guest-timeout needs a value}"
    shift 2
fi
case "${1:-}" in -h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac

# shellcheck source=../scripts/java25.sh
. scripts/java25.sh
if [[ ! -s perf/target/verbs-perf.jar || ! -s benchmarks/target/verbs4j-benchmarks.jar ]]; then
    echo "noise-pass: building perf/target/verbs-perf.jar and benchmarks/target/verbs4j-benchmarks.jar (./mvnw -B -q package -DskipTests)" >&2
    ./mvnw -B -q -ntp package -DskipTests
fi
export VERBS4J_PERF_RETRIES="${VERBS4J_PERF_RETRIES:-3}"
OUT=target/perf-noise
for ((i = 1; i < $#; i++)); do [[ ${!i} != --out ]] || { j=$((i + 1)); OUT=${!j}; }; done
rc=0
benchmarks/perftest-compare.sh --guest --guest-timeout "$GUEST_TIMEOUT" \
    --tests 'write_bw send_bw read_bw atomic_bw write_lat send_lat read_lat atomic_lat' \
    --pairs 'pt-pt vp-pt pt-pt.ctl pt-vp pt-pt.2' --bw-sizes '4096 65536' --lat-sizes '2 4096' \
    --lat-iters 20000 --bw-extra '-D 4 -f 1' --extra -F --warm-runs 1 --repeats 2 --timeout 60 \
    --interleave --out "$OUT" "$@" || rc=$?
if [[ -f benchmarks/results.py && -s "$OUT/compare.txt" ]]; then
    python3 benchmarks/results.py stamp "$OUT" --command "benchmarks/noise-pass.sh${*:+ $*}" || rc=1
fi
exit $rc
