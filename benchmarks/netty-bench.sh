#!/usr/bin/env bash
# netty-bench.sh — the verbs-netty transport measured on one Soft-RoCE guest boot: echo round-trip
# latency (p50/p99) and streaming throughput for each size through verbs-netty and through Netty's
# NIO transport over TCP on the same interface (NettyBench), beside verbs-perf's send_lat and
# send_bw of the same sizes (the raw verbs floor), with the ratios. Not a timed test: a report.
#
# Usage: benchmarks/netty-bench.sh [--sizes "64 4096 65536"] [--lat-iters N] [--warmup N] [--bw-bytes N] [--insn]
#   --insn  also count user-mode instructions per echo round trip, the way benchmarks/insn-gate.sh
#           counts (softroce/tcg-insn-plugin.c, deterministic under the emulator): after the timed
#           runs, verbs-perf's send_lat (against perftest's server, as the gate runs it) and a
#           verbs-netty echo client and server in two JVMs (client on vCPU 0, server on vCPU 1)
#           at 64 B, with the plugin's opdelay on (the client's vCPU waits 300 µs after each system
#           call, so that the peer has answered before it looks). The plugin makes the whole boot
#           ~2x slower, the timed runs included: compare the ratios, not the absolute figures.
#   On a host without an RDMA device it boots a fresh guest (softroce/run-in-guest.sh) and runs
#   itself there; take the machine-wide guest lock first:
#     flock /tmp/verbs4j-guest-global.lock benchmarks/netty-bench.sh --insn
#   Builds perf/target/verbs-perf.jar and benchmarks/target/verbs4j-benchmarks.jar when missing
#   (./mvnw package -DskipTests, never install).
# Output: the tables on stdout and in target/netty-bench/results.txt (with --insn also the
# stamped console, console.txt, and the plugin's records, ops.txt, beside it).
# Environment: VERBS4J_GUEST_IP (default 10.0.0.1), VERBS4J_NETTY_BENCH_TIMEOUT (default 1500 s).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
SIZES="64 4096 65536"
LAT_ITERS=3000
WARMUP=2000
BW_BYTES=$((64 << 20))
INSN=0
INSN_SIZES=64
ARGS=("$@")
while [[ $# -gt 0 ]]; do
    case "$1" in
    --sizes) SIZES="${2:?}"; shift 2 ;;
    --lat-iters) LAT_ITERS="${2:?}"; shift 2 ;;
    --warmup) WARMUP="${2:?}"; shift 2 ;;
    --bw-bytes) BW_BYTES="${2:?}"; shift 2 ;;
    --insn) INSN=1; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "netty-bench.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
PERF_JAR="$ROOT/perf/target/verbs-perf.jar"
BENCH_JAR="$ROOT/benchmarks/target/verbs4j-benchmarks.jar"
IP="${VERBS4J_GUEST_IP:-10.0.0.1}"
OUT="$ROOT/target/netty-bench"
say() { echo "[netty-bench] $*"; }

if [[ "${VERBS4J_GUEST:-}" != 1 ]] && ! compgen -G "/sys/class/infiniband/*" >/dev/null; then
    # shellcheck source=../scripts/java25.sh disable=SC1091
    . "$ROOT/scripts/java25.sh"
    if [[ ! -s "$PERF_JAR" || ! -s "$BENCH_JAR" ]]; then
        say "building: ./mvnw -B -q package -DskipTests -pl perf,benchmarks -am"
        ./mvnw -B -q package -DskipTests -pl perf,benchmarks -am
    fi
    rm -rf "$OUT"
    mkdir -p "$OUT"
    quoted=""
    if ((${#ARGS[@]})); then
        quoted=$(printf ' %q' "${ARGS[@]}")
    fi
    guest=("$ROOT/softroce/run-in-guest.sh" --timeout "${VERBS4J_NETTY_BENCH_TIMEOUT:-1500}" --share "$ROOT" --
        "cd $(printf '%q' "$ROOT") && ./benchmarks/netty-bench.sh$quoted")
    say "no RDMA device here: booting a Soft-RoCE qemu guest"
    if ((INSN == 0)); then
        exec "${guest[@]}"
    fi
    # qemu splits VERBS4J_GUEST_QEMU_ARGS at spaces and the plugin's options at commas
    [[ $OUT != *[[:space:],]* ]] || { echo "netty-bench.sh: $OUT has a space or comma in it" >&2; exit 2; }
    gcc -O2 -shared -fPIC -fvisibility=hidden -o "$OUT/tcg-insn.so" softroce/tcg-insn-plugin.c -lpthread
    rc=0
    VERBS4J_GUEST_QEMU_ARGS="-plugin $OUT/tcg-insn.so,ops=$OUT/ops.txt,opdelay=300,opdelay-when=$OUT/opdelay-on" \
        VERBS4J_GUEST_LOG="$OUT/guest-console.log" "${guest[@]}" 2>&1 |
        python3 softroce/tcg-sampler.py stamp | tee "$OUT/console.txt" || rc=$?
    python3 benchmarks/netty-insn.py --console "$OUT/console.txt" --ops "$OUT/ops.txt" | tee -a "$OUT/results.txt" || rc=1
    exit "$rc"
fi

# in the guest (or on a host with a device): verbs-perf first, then NettyBench with its figures
mkdir -p "$OUT"
perf_run() { # TEST SIZE FIELD -> the client's figure in column FIELD of its data row
    local test=$1 size=$2 field=$3 iters=1000 out
    [[ $test == send_bw ]] && iters=5000
    timeout 180 java --enable-native-access=ALL-UNNAMED -jar "$PERF_JAR" "$test" -d rxe0 -x 1 -s "$size" -n "$iters" \
        >/tmp/netty-bench-server.out 2>&1 &
    local server=$!
    until ss -ltn | grep -q ':18515 '; do
        kill -0 "$server" 2>/dev/null || { cat /tmp/netty-bench-server.out >&2; return 1; }
        sleep 0.5
    done
    out=$(timeout 180 java --enable-native-access=ALL-UNNAMED -jar "$PERF_JAR" "$test" -d rxe0 -x 1 -s "$size" -n "$iters" "$IP")
    wait "$server"
    echo "$out" >&2
    awk -v s="$size" -v f="$field" '$1 == s && NF >= f { print $f; exit }' <<<"$out"
}
LAT=() BW=()
for s in $SIZES; do
    v=$(perf_run send_lat "$s" 5) || v=""
    [[ -z $v ]] || LAT+=("$s=$v")
    v=$(perf_run send_bw "$s" 4) || v=""
    [[ -z $v ]] || BW+=("$s=$v")
done
plugin=""
((INSN == 0)) || plugin=", under the instruction-counting plugin (~2x slower)"
{
    echo "netty-bench.sh $(date -u '+%Y-%m-%d %H:%M UTC'): kernel $(uname -r), $(nproc) vCPUs, rxe0 on $IP$plugin"
    say "verbs-perf send_lat t_typical (us): ${LAT[*]}; send_bw BW average (MB/s): ${BW[*]}"
    timeout 900 java --enable-native-access=ALL-UNNAMED -cp "$BENCH_JAR" org.verbs4j.bench.NettyBench --address "$IP" \
        --sizes "$(tr ' ' ',' <<<"$SIZES")" --lat-iters "$LAT_ITERS" --warmup "$WARMUP" --bw-bytes "$BW_BYTES" \
        ${LAT[0]:+--send-lat "$(IFS=,; echo "${LAT[*]}")"} ${BW[0]:+--send-bw "$(IFS=,; echo "${BW[*]}")"}
} 2>&1 | tee "$OUT/results.txt" || say "NettyBench failed (exit $?)"
((INSN)) || exit 0

# the instruction counts: the plugin's opdelay from here on (it looks for the file every 250 ms)
touch "$OUT/opdelay-on"
sleep 1
say "counting: verbs-perf send_lat against perftest's server (marks for softroce/tcg-insn-report.py)"
VERBS4J_PERF_MARKS=1 VERBS4J_PERF_RETRIES=3 benchmarks/perftest-compare.sh --pairs "pt-pt vp-pt" --tests send_lat \
    --lat-sizes "$INSN_SIZES" --bw-sizes 2 --lat-iters 2000 --warm-runs 1 --repeats 2 --interleave --timeout 60 \
    --out "$OUT/perf-runs" 2>&1 || say "perftest-compare.sh failed (exit $?): its counts are missing"
say "counting: verbs-netty echo, server on vCPU 1, client on vCPU 0"
JIT_OPTS=(-XX:PerMethodTrapLimit=0 -XX:CompileCommand=quiet "-XX:CompileCommand=CompileThresholdScaling,org.verbs4j.*::*,0.02")
rm -f /tmp/netty-bench-serve.in
mkfifo /tmp/netty-bench-serve.in
taskset -c 1 timeout 600 java --enable-native-access=ALL-UNNAMED "${JIT_OPTS[@]}" -cp "$BENCH_JAR" \
    org.verbs4j.bench.NettyBench --serve --transports rdma --address "$IP" --port 18700 \
    </tmp/netty-bench-serve.in >/tmp/netty-bench-serve.out 2>&1 &
server=$!
exec 3>/tmp/netty-bench-serve.in
until grep -q "listening" /tmp/netty-bench-serve.out; do
    kill -0 "$server" 2>/dev/null || break
    sleep 0.5
done
taskset -c 0 timeout 600 java --enable-native-access=ALL-UNNAMED "${JIT_OPTS[@]}" -cp "$BENCH_JAR" \
    org.verbs4j.bench.NettyBench --count-echo --transports rdma --address "$IP" --port 18700 \
    --sizes "$(tr ' ' ',' <<<"$INSN_SIZES")" --warmup 5000 --lat-iters 1000 --repeats 3 ||
    say "the counting client failed (exit $?)"
exec 3>&-
wait "$server" || say "the counting server failed: $(cat /tmp/netty-bench-serve.out)"
rm -f "$OUT/opdelay-on"
