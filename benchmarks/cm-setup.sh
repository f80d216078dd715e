#!/usr/bin/env bash
# cm-setup.sh — connection setup through rdma_cm: verbs-perf cm-setup next to librdmacm's cmtime.
#
# For each count N of --counts, on one device, in one run (each client and server a separate
# process on this host, loopback through the RDMA device):
#   cmtime  -> cmtime     cmtime's client against its own server (the baseline)
#   verbs4j -> cmtime     verbs-perf cm-setup as the active side, --api async, then blocking (two
#                         rounds in one JVM each: the first includes the JIT's warm-up, the second not)
#   cmtime  -> verbs4j    cmtime's client against verbs-perf cm-setup as the passive side (async, blocking)
# and prints one line per run: who, the side measured, N, the time and connects/s. cmtime's rate is
# N over the sum of its setup steps' totals (create id, bind, resolve addr, resolve route, create
# qp, connect: its client runs them one step at a time for all N, as it prints them); verbs-perf's
# is N over the time from the first connect (or request) to the last connection established. The
# raw outputs are in target/cm-setup/.
#
# Usage (on a host with an RDMA device, or in the Soft-RoCE guest; --guest boots one):
#   benchmarks/cm-setup.sh [--guest] [--counts "1 10 100"] [--addr IP] [--threads virtual|platform]
# --guest boots a fresh guest (softroce/run-in-guest.sh) and runs this script there; hold the
# machine-wide guest lock around it: flock /tmp/verbs4j-guest-global.lock benchmarks/cm-setup.sh --guest
# Builds perf/target/verbs-perf.jar first when it is missing (./mvnw package, no install).
# Exit status: 0 when every verbs-perf run set up all its connections, 1 otherwise.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
COUNTS="1 10 100"
ADDR="${VERBS4J_GUEST_IP:-}"
THREADS=virtual
GUEST=0
while [[ $# -gt 0 ]]; do
    case "$1" in
    --guest) GUEST=1; shift ;;
    --counts) COUNTS="${2:?--counts needs a value}"; shift 2 ;;
    --addr) ADDR="${2:?--addr needs a value}"; shift 2 ;;
    --threads) THREADS="${2:?--threads needs a value}"; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "cm-setup.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done

JAR="$ROOT/perf/target/verbs-perf.jar"
if [[ ! -f "$JAR" ]]; then
    if [[ -n "${VERBS4J_GUEST:-}" ]]; then
        echo "cm-setup.sh: $JAR is missing; build it on the host first" >&2
        exit 2
    fi
    ./mvnw -B -q package -DskipTests -pl perf -am
fi

if [[ $GUEST == 1 ]]; then
    exec "$ROOT/softroce/run-in-guest.sh" --timeout 2400 --share "$ROOT" -- \
        "cd $(printf '%q' "$ROOT") && benchmarks/cm-setup.sh --counts $(printf '%q' "$COUNTS") --threads $THREADS"
fi

[[ -n "$ADDR" ]] || { echo "cm-setup.sh: give the device's IP address with --addr" >&2; exit 2; }
OUT="$ROOT/target/cm-setup"
mkdir -p "$OUT"
PORT=7471
rc=0
JAVA=(java --enable-native-access=ALL-UNNAMED -cp "$JAR" org.verbs4j.perf.VerbsPerf cm-setup)

# waits (at most 120 s) until a cm id listens on port $1
await_listener() {
    local i
    for ((i = 0; i < 240; i++)); do
        if rdma res show cm_id 2>/dev/null | grep LISTEN | grep -q ":$1 "; then
            return 0
        fi
        sleep 0.5
    done
    echo "cm-setup.sh: nothing listens on port $1 after 120 s" >&2
    return 1
}

# cmtime's client output ($1) -> "N connections in X ms = R connects/s"
cmtime_rate() {
    awk -F: -v n="$2" '
        /^(create id|bind addr|resolve addr|resolve route|create qp|connect) *:/ { split($2, a, " "); ms += a[1] }
        END { if (ms > 0) printf "%d connections in %.1f ms = %.1f connects/s\n", n, ms, n / (ms / 1000); else print "no result" }
    ' "$1"
}

stop() {
    kill "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
}

# the timeline of one connect (after two to warm up): each connection-manager event, with the time
# it was dispatched, from verbs4j's debug log
PORT=$((PORT + 1))
cmtime -b "$ADDR" -p "$PORT" >"$OUT/cmtime-server-timeline.out" 2>&1 &
srv=$!
await_listener "$PORT"
timeout 600 java --enable-native-access=ALL-UNNAMED -Dorg.slf4j.simpleLogger.log.org.verbs4j.cm=debug \
    -Dorg.slf4j.simpleLogger.showDateTime=true -Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS \
    -cp "$JAR" org.verbs4j.perf.VerbsPerf cm-setup -s "$ADDR" -p "$PORT" -c 1 --api blocking --rounds 3 \
    >"$OUT/timeline.out" 2>&1 || rc=1
stop "$srv"
echo "one connect, third of three in one JVM (verbs4j blocking -> cmtime):"
awk '/connects\/s/ { if (++k == 3) print; next } k == 2 && /cm event/' "$OUT/timeline.out" | sed 's/^/  /'
for n in $COUNTS; do
    # cmtime -> cmtime
    PORT=$((PORT + 1))
    cmtime -b "$ADDR" -p "$PORT" >"$OUT/cmtime-server-$n.out" 2>&1 &
    srv=$!
    await_listener "$PORT"
    timeout 600 cmtime -s "$ADDR" -p "$PORT" -c "$n" >"$OUT/cmtime-cmtime-$n.out" 2>&1 || true
    echo "cmtime -> cmtime   cmtime active:   $(cmtime_rate "$OUT/cmtime-cmtime-$n.out" "$n")"
    # verbs4j -> cmtime
    for api in async blocking; do
        timeout 600 "${JAVA[@]}" -s "$ADDR" -p "$PORT" -c "$n" --api "$api" --threads "$THREADS" --rounds 2 \
            >"$OUT/verbs4j-$api-cmtime-$n.out" 2>&1 || rc=1
        grep -h 'active:.*connects/s' "$OUT/verbs4j-$api-cmtime-$n.out" | sed 's/^/verbs4j -> cmtime  /'
    done
    stop "$srv"
    # cmtime -> verbs4j
    for api in async blocking; do
        PORT=$((PORT + 1))
        timeout 600 "${JAVA[@]}" -b "$ADDR" -p "$PORT" -c "$n" --api "$api" --threads "$THREADS" \
            >"$OUT/cmtime-verbs4j-$api-$n.out" 2>&1 &
        srv=$!
        await_listener "$PORT"
        timeout 600 cmtime -s "$ADDR" -p "$PORT" -c "$n" >"$OUT/cmtime-client-$api-$n.out" 2>&1 || true
        wait "$srv" || rc=1
        echo "cmtime -> verbs4j  $(grep -h 'passive:.*connects/s' "$OUT/cmtime-verbs4j-$api-$n.out" | head -1)"
        echo "                   (cmtime active:  $(cmtime_rate "$OUT/cmtime-client-$api-$n.out" "$n"))"
    done
done
exit $rc
