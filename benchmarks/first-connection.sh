#!/usr/bin/env bash
# first-connection.sh — a fresh JVM's first Netty connection, phase by phase (event loop groups,
# bind, connect, one echoed byte; then the same again, warm), through verbs-netty and through
# Netty's NIO transport over TCP on the same interface (org.verbs4j.bench.NettyFirstConnection),
# each in its own JVM, on one Soft-RoCE guest boot. Not a timed test: a report.
#
# Usage: benchmarks/first-connection.sh [--runs N] [--aot]
#   --runs N  fresh JVMs per transport (default 2)
#   --aot     also a JDK AOT cache (JEP 483/514/515): one training run of the RDMA case with
#             -XX:AOTCacheOutput, then --runs runs with -XX:AOTCache (cache in target/first-connection/)
#   On a host without an RDMA device it boots a fresh guest (softroce/run-in-guest.sh) and runs
#   itself there; take the machine-wide guest lock first:
#     flock /tmp/verbs4j-guest-global.lock benchmarks/first-connection.sh --aot
#   Builds benchmarks/target/verbs4j-benchmarks.jar when missing (./mvnw package -DskipTests).
# Output: the phase lines on stdout. Environment: VERBS4J_GUEST_IP (default 10.0.0.1).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
RUNS=2
AOT=0
ARGS=("$@")
while [[ $# -gt 0 ]]; do
    case "$1" in
    --runs) RUNS="${2:?}"; shift 2 ;;
    --aot) AOT=1; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "first-connection.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
BENCH_JAR="$ROOT/benchmarks/target/verbs4j-benchmarks.jar"
IP="${VERBS4J_GUEST_IP:-10.0.0.1}"
OUT="$ROOT/target/first-connection"

if [[ "${VERBS4J_GUEST:-}" != 1 ]] && ! compgen -G "/sys/class/infiniband/*" >/dev/null; then
    # shellcheck source=../scripts/java25.sh disable=SC1091
    . "$ROOT/scripts/java25.sh"
    if [[ ! -s "$BENCH_JAR" ]]; then
        echo "[first-connection] building: ./mvnw -B -q package -DskipTests -pl benchmarks -am"
        ./mvnw -B -q package -DskipTests -pl benchmarks -am
    fi
    quoted=""
    if ((${#ARGS[@]})); then
        quoted=$(printf ' %q' "${ARGS[@]}")
    fi
    echo "[first-connection] no RDMA device here: booting a Soft-RoCE qemu guest"
    exec "$ROOT/softroce/run-in-guest.sh" --timeout 1800 --share "$ROOT" -- \
        "cd $(printf '%q' "$ROOT") && ./benchmarks/first-connection.sh$quoted"
fi

rm -rf "$OUT"
mkdir -p "$OUT"
first() { # TRANSPORT [JVM options...]
    local t=$1
    shift
    timeout 600 java --enable-native-access=ALL-UNNAMED "$@" -cp "$BENCH_JAR" \
        org.verbs4j.bench.NettyFirstConnection "$IP" "$t" || echo "[first-connection] $t: the JVM exited with status $?"
}
for ((i = 1; i <= RUNS; i++)); do
    echo "[first-connection] rdma, fresh JVM $i"
    first rdma
    echo "[first-connection] nio, fresh JVM $i"
    first nio
done
if ((AOT)); then
    echo "[first-connection] rdma, AOT training run (-XX:AOTCacheOutput)"
    first rdma "-XX:AOTCacheOutput=$OUT/first-connection.aot"
    for ((i = 1; i <= RUNS; i++)); do
        echo "[first-connection] rdma, fresh JVM $i with the AOT cache"
        first rdma "-XX:AOTCache=$OUT/first-connection.aot"
    done
fi
