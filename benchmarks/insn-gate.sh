#!/usr/bin/env bash
# insn-gate.sh — the instruction-count performance gate: verbs-perf's client against perftest's,
# counted in user-mode instructions per operation, in one Soft-RoCE guest boot.
#
# Under qemu's TCG every guest instruction is emulated at about the same cost, and the number a
# loop executes per operation does not depend on the host's load, where its time does. So the gate
# counts instructions, not seconds: softroce/tcg-insn-plugin.c (built here with gcc into
# target/insn-gate/) records, for every system call the client's vCPU makes in user mode, the user
# instructions since the previous one and the call's address. On rxe each post is one write(2), so
# the calls from the post's address delimit the loop's operations (softroce/tcg-insn-report.py
# --ops adds up the records between two posts). The plugin's opdelay makes that vCPU wait after
# each system call, so that the peer (perftest's server, on the other vCPU) has answered before the
# client polls: the poll finds the answer at its first try, and an operation's count is the
# client's own work, not a number of empty polls that depends on how the host ran the two vCPUs.
#
# Runs (benchmarks/perftest-compare.sh --guest --interleave, every process pinned: client vCPU 0,
# server vCPU 1; one warm run discarded before each measured one, the JIT idle before each run):
# send_lat, write_lat and read_lat at 2 B and write_bw at 2 B, each by pair pt-pt (perftest's
# client) and vp-pt (verbs-perf's client), both against perftest's server, --repeats times.
# A test's figure: per run, the most frequent count of an operation over the middle of the run
# (every operation of a loop runs the same instructions; a compile, a timer or another thread on
# the vCPU adds to a few; in write_bw the one post in 100 that also polls counts apart); per tool,
# the lowest over its runs (a JVM's JIT still improves its code over the first runs; nothing but a
# change of the code makes an operation's count lower). See benchmarks/insn-gate/gate.py.
#
# Verdict: FAIL (exit 1) when a test's verbs-perf figure is more than the tolerance over the
# committed baseline (benchmarks/insn-gate/baseline.json), or its ratio verbs-perf / perftest
# more than the tolerance over the baseline's ratio, or a count is missing; else PASS (exit 0).
# perftest's figures repeat exactly, run to run and boot to boot, loaded machine or not; verbs-perf's
# vary with the JIT: a boot's first measured run can be far higher (a compile still pending), its
# later runs agree exactly, and one boot's JIT may compile its loops up to ~16% better or worse than
# another's (the same code in five boots: read_lat 1163-1379, send_lat 2103-2471, write_lat
# 1232-1431, write_bw 663-737; a busy host does not make them higher). So a boot's figure is its
# lowest run, the committed baseline is the highest of several boots' figures per test (gate.py
# --update-baseline --runs A/runs.json B/runs.json ...), and the gate allows 8% over it. What fails
# it: a 300-iteration loop added to QueuePair.postSend (+1,300 instructions per post) put every test
# 57-189% over its baseline; +300 instructions per operation fails write_bw in any boot, and the
# latency tests in a boot whose JIT compiled as the baseline's did.
# Prints the table (test, verbs-perf, perftest, ratio, baseline, verdict) and writes
# target/insn-gate/result.json (date, machine, command, rows). Exit 2: usage, or no build.
#
# Usage: benchmarks/insn-gate.sh [--timeout SEC] [--repeats R] [--update-baseline]
#   --timeout SEC      bound on the guest, boot included (default 900)
#   --repeats R        measured runs per test and tool (default 3)
#   --update-baseline  write the baseline from this run's figures instead of judging them
#                      (review the diff of benchmarks/insn-gate/baseline.json before committing it)
# Environment: VERBS4J_INSN_GATE_OPDELAY (µs, default 300: the client's wait after each post; long
# enough for perftest's server to answer a 2 B message under TCG, short enough for a JVM's
# start-up), VERBS4J_INSN_GATE_ITERS (operations per run, default 2000).
# Boots one guest (~2x slower with the plugin): a caller that serializes guests on the machine
# holds its lock around this script.
# Needs: gcc, python3, qemu (softroce/README.md), perf/target/verbs-perf.jar and benchmarks/target/verbs4j-benchmarks.jar (built
# with ./mvnw package when missing).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
TIMEOUT=900
REPEATS=3
UPDATE=()
CMDLINE="benchmarks/insn-gate.sh${*:+ $*}"
while [[ $# -gt 0 ]]; do
    case "$1" in
        --timeout) TIMEOUT=${2:?--timeout needs seconds}; shift ;;
        --repeats) REPEATS=${2:?--repeats needs a count}; shift ;;
        --update-baseline) UPDATE=(--update-baseline) ;;
        -h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "insn-gate: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done
[[ $TIMEOUT =~ ^[0-9]+$ && $REPEATS =~ ^[1-9][0-9]*$ ]] || { echo "insn-gate: bad --timeout or --repeats" >&2; exit 2; }
OPDELAY=${VERBS4J_INSN_GATE_OPDELAY:-300}
ITERS=${VERBS4J_INSN_GATE_ITERS:-2000}
OUT="$ROOT/target/insn-gate"
BASELINE="$ROOT/benchmarks/insn-gate/baseline.json"
T0=$SECONDS
say() { echo "[insn-gate +$((SECONDS - T0))s] $*" >&2; }

# qemu splits VERBS4J_GUEST_QEMU_ARGS at spaces and the plugin's options at commas
[[ $OUT != *[[:space:],]* ]] || { echo "insn-gate: $OUT has a space or comma in it" >&2; exit 2; }
command -v gcc >/dev/null || { echo "insn-gate: gcc is missing (it builds the TCG plugin)" >&2; exit 2; }
# shellcheck source=../scripts/java25.sh disable=SC1091
[[ -n "${JAVA_HOME:-}" ]] || source "$ROOT/scripts/java25.sh"
if [[ ! -s perf/target/verbs-perf.jar || ! -s benchmarks/target/verbs4j-benchmarks.jar ]]; then
    say "building perf/target/verbs-perf.jar and benchmarks/target/verbs4j-benchmarks.jar"
    ./mvnw -B -q -pl perf,benchmarks -am package -DskipTests || exit 2
fi

rm -rf "$OUT"
mkdir -p "$OUT"
gcc -O2 -shared -fPIC -fvisibility=hidden -o "$OUT/tcg-insn.so" softroce/tcg-insn-plugin.c -lpthread
say "one guest with the instruction-counting plugin (opdelay ${OPDELAY} µs): send_lat write_lat read_lat write_bw, 2 B, $ITERS operations a run, $REPEATS measured runs each, perftest's client and verbs-perf's"
rc=0
VERBS4J_GUEST_QEMU_ARGS="-plugin $OUT/tcg-insn.so,ops=$OUT/ops.txt,opdelay=$OPDELAY" \
    VERBS4J_GUEST_LOG="$OUT/guest-console.log" VERBS4J_PERF_MARKS=1 VERBS4J_PERF_RETRIES=3 \
    benchmarks/perftest-compare.sh --guest --guest-timeout "$TIMEOUT" --pairs "pt-pt vp-pt" \
    --tests "send_lat write_lat read_lat write_bw" --lat-sizes 2 --bw-sizes 2 \
    --lat-iters "$ITERS" --bw-iters "$ITERS" --warm-runs 1 --repeats "$REPEATS" --interleave \
    --timeout 60 --out target/insn-gate/runs 2>&1 | python3 softroce/tcg-sampler.py stamp | tee "$OUT/console.txt" \
    || rc=$?
if ((rc != 0)); then
    say "the runs did not all succeed (exit $rc; console: $OUT/guest-console.log): judging what was counted"
fi
say "runs done; counting"
python3 softroce/tcg-insn-report.py --console "$OUT/console.txt" --ops "$OUT/ops.txt" --json "$OUT/runs.json" || true
grc=0
python3 benchmarks/insn-gate/gate.py --runs "$OUT/runs.json" --baseline "$BASELINE" --result "$OUT/result.json" \
    --command "$CMDLINE" --opdelay "$OPDELAY" "${UPDATE[@]}" || grc=$?
say "done in $((SECONDS - T0)) s"
if ((grc == 0 && rc != 0)); then
    echo "insn-gate: FAIL: the runs failed (exit $rc) although the counts passed" >&2
    exit 1
fi
exit "$grc"
