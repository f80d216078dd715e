#!/usr/bin/env bash
# netty-bench.sh — the verbs-netty transport measured on one Soft-RoCE guest boot: echo round-trip
# latency (p50/p99) and streaming throughput for each size through verbs-netty and through Netty's
# NIO transport over TCP on the same interface (NettyBench), beside verbs-perf's send_lat and
# send_bw of the same sizes (the raw verbs floor), with the ratios. Not a timed test: a report.
#
# Usage: benchmarks/netty-bench.sh [--sizes "64 4096 65536"] [--lat-iters N] [--bw-bytes N]
#   On a host without an RDMA device it boots a fresh guest (softroce/run-in-guest.sh) and runs
#   itself there; take the machine-wide guest lock first:
#     flock /tmp/verbs4j-guest-global.lock benchmarks/netty-bench.sh
#   Builds perf/target/verbs-perf.jar and benchmarks/target/verbs4j-benchmarks.jar when missing
#   (./mvnw package -DskipTests, never install).
# Environment: VERBS4J_GUEST_IP (default 10.0.0.1), VERBS4J_NETTY_BENCH_TIMEOUT (default 1800 s).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
SIZES="64 4096 65536"
LAT_ITERS=5000
BW_BYTES=$((64 << 20))
ARGS=("$@")
while [[ $# -gt 0 ]]; do
    case "$1" in
    --sizes) SIZES="${2:?}"; shift 2 ;;
    --lat-iters) LAT_ITERS="${2:?}"; shift 2 ;;
    --bw-bytes) BW_BYTES="${2:?}"; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "netty-bench.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
PERF_JAR="$ROOT/perf/target/verbs-perf.jar"
BENCH_JAR="$ROOT/benchmarks/target/verbs4j-benchmarks.jar"
IP="${VERBS4J_GUEST_IP:-10.0.0.1}"
say() { echo "[netty-bench] $*"; }

if [[ "${VERBS4J_GUEST:-}" != 1 ]] && ! compgen -G "/sys/class/infiniband/*" >/dev/null; then
    # shellcheck source=../scripts/java25.sh
    . "$ROOT/scripts/java25.sh"
    if [[ ! -s "$PERF_JAR" || ! -s "$BENCH_JAR" ]]; then
        say "building: ./mvnw -B -q package -DskipTests -pl perf,benchmarks -am"
        ./mvnw -B -q package -DskipTests -pl perf,benchmarks -am
    fi
    quoted=""
    if ((${#ARGS[@]})); then
        quoted=$(printf ' %q' "${ARGS[@]}")
    fi
    say "no RDMA device here: booting a Soft-RoCE qemu guest"
    exec "$ROOT/softroce/run-in-guest.sh" --timeout "${VERBS4J_NETTY_BENCH_TIMEOUT:-1800}" --share "$ROOT" -- \
        "cd $(printf '%q' "$ROOT") && ./benchmarks/netty-bench.sh$quoted"
fi

# in the guest (or on a host with a device): verbs-perf first, then NettyBench with its figures
perf_run() { # TEST SIZE FIELD -> the client's figure in column FIELD of its data row
    local test=$1 size=$2 field=$3 iters=1000 out
    [[ $test == send_bw ]] && iters=5000
    java --enable-native-access=ALL-UNNAMED -jar "$PERF_JAR" "$test" -d rxe0 -x 1 -s "$size" -n "$iters" \
        >/tmp/netty-bench-server.out 2>&1 &
    local server=$!
    until ss -ltn | grep -q ':18515 '; do
        kill -0 "$server" 2>/dev/null || { cat /tmp/netty-bench-server.out >&2; return 1; }
        sleep 0.5
    done
    out=$(java --enable-native-access=ALL-UNNAMED -jar "$PERF_JAR" "$test" -d rxe0 -x 1 -s "$size" -n "$iters" "$IP")
    wait "$server"
    echo "$out" >&2
    awk -v s="$size" -v f="$field" '$1 == s && NF >= f { print $f; exit }' <<<"$out"
}
LAT=() BW=()
for s in $SIZES; do
    LAT+=("$s=$(perf_run send_lat "$s" 5)")
    BW+=("$s=$(perf_run send_bw "$s" 4)")
done
say "verbs-perf send_lat t_typical (us): ${LAT[*]}; send_bw BW average (MB/s): ${BW[*]}"
java --enable-native-access=ALL-UNNAMED -cp "$BENCH_JAR" org.verbs4j.bench.NettyBench --address "$IP" \
    --sizes "$(tr ' ' ',' <<<"$SIZES")" --lat-iters "$LAT_ITERS" --bw-bytes "$BW_BYTES" \
    --send-lat "$(IFS=,; echo "${LAT[*]}")" --send-bw "$(IFS=,; echo "${BW[*]}")"
