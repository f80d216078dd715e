#!/usr/bin/env bash
# cm-setup.sh — connection setup through rdma_cm: verbs-perf cm-setup next to librdmacm's cmtime.
#
# For each count N of --counts, on one device, in one run (each client and server a separate
# process on this host, loopback through the RDMA device; each cmtime server serves one client
# run and is then stopped: a cmtime server whose first connection closed creates its next queue
# pairs on that connection's destroyed completion queues and refuses them, "failure creating qp"):
#   cmtime  -> cmtime     cmtime's client against its own server (the baseline)
#   verbs4j -> cmtime     verbs-perf cm-setup as the active side, --api async, then blocking
#                         (--rounds R in one JVM each, default 2, against R cmtime servers: the
#                         first round includes the JIT's warm-up, the later ones less of it)
#   cmtime  -> verbs4j    cmtime's client against verbs-perf cm-setup as the passive side (async, blocking;
#                         R runs of cmtime's client, one after another, against one JVM, each reported)
# and prints one line per run: who, the side measured, N, the time and connects/s. cmtime's rate is
# N over the sum of its setup steps' totals (create id, bind, resolve addr, resolve route, create
# qp, connect: its client runs them one step at a time for all N, as it prints them); verbs-perf's
# is N over the time from the first connect (or request) to the last connection established. The
# queue pairs of both are alike: one work request and one SGE each way, one pair of completion
# queues shared by all connections (what cmtime ends up with; verbs-perf --cqs). The table is
# written to target/cm-setup/summary.txt, the raw outputs beside it.
#
# --profile: verbs4j also logs the wall time of each setup step (org.verbs4j.cm.SetupTimings at
# debug) and a summary per run (step, count, total ms, mean us; over all rounds, and over the last,
# the warmest, alone) follows its line; cmtime's client output gets a time stamp per line (where
# its steps stall).
# --jfr: each verbs4j JVM records a flight recording (settings=profile) to target/cm-setup/*.jfr.
# --before DIR: each verbs4j run is made twice, first with the library classes of DIR ahead of the
# jar's (an earlier build: before/after on one boot), its lines marked "before:".
#
# Usage (on a host with an RDMA device, or in the Soft-RoCE guest; --guest boots one):
#   benchmarks/cm-setup.sh [--guest] [--counts "1 10 100"] [--addr IP] [--threads virtual|platform]
#                          [--rounds R] [--budget SECONDS] [--profile] [--jfr] [--before DIR]
# --budget bounds the whole run (default 1200 s): each command gets at most what is left, and a
# count that would start with less than a minute left is skipped (said so). --guest boots a fresh
# guest (softroce/run-in-guest.sh, bounded by the budget plus the boot) and runs this script there;
# hold the machine-wide guest lock around it:
#   flock /tmp/verbs4j-guest-global.lock benchmarks/cm-setup.sh --guest
# Builds perf/target/verbs-perf.jar first when it is missing (./mvnw package, no install).
# Exit status: 0 when every verbs-perf run set up all its connections, 1 otherwise.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
COUNTS="1 10 100"
ADDR="${VERBS4J_GUEST_IP:-}"
THREADS=virtual
GUEST=0
BUDGET=1200
PROFILE=0
JFR=0
BEFORE=
ROUNDS=2
while [[ $# -gt 0 ]]; do
    case "$1" in
    --guest) GUEST=1; shift ;;
    --counts) COUNTS="${2:?--counts needs a value}"; shift 2 ;;
    --addr) ADDR="${2:?--addr needs a value}"; shift 2 ;;
    --threads) THREADS="${2:?--threads needs a value}"; shift 2 ;;
    --budget) BUDGET="${2:?--budget needs a value}"; shift 2 ;;
    --profile) PROFILE=1; shift ;;
    --jfr) JFR=1; shift ;;
    --before) BEFORE="${2:?--before needs a folder}"; shift 2 ;;
    --rounds) ROUNDS="${2:?--rounds needs a value}"; shift 2 ;;
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
    args=(--counts "$COUNTS" --threads "$THREADS" --budget "$BUDGET" --rounds "$ROUNDS")
    ((PROFILE)) && args+=(--profile)
    ((JFR)) && args+=(--jfr)
    [[ -n "$BEFORE" ]] && args+=(--before "$BEFORE")
    # single-threaded TCG, as the test tiers: multi-threaded TCG crashed verbs-perf JVMs (SIGSEGV at
    # freshly patched C1 code) in 2 of 2 runs at N = 100; VERBS4J_GUEST_ACCEL overrides it
    VERBS4J_GUEST_ACCEL="${VERBS4J_GUEST_ACCEL:-tcg,thread=single,tb-size=512}" \
        exec "$ROOT/softroce/run-in-guest.sh" --timeout $((BUDGET + 300)) --share "$ROOT" -- \
        "cd $(printf '%q' "$ROOT") && benchmarks/cm-setup.sh $(printf '%q ' "${args[@]}")"
fi

[[ -n "$ADDR" ]] || { echo "cm-setup.sh: give the device's IP address with --addr" >&2; exit 2; }
OUT="$ROOT/target/cm-setup"
mkdir -p "$OUT"
SUMMARY="$OUT/summary.txt"
: >"$SUMMARY"
END=$((SECONDS + BUDGET))
PORT=7471
rc=0
JVM=(java --enable-native-access=ALL-UNNAMED)
if ((PROFILE)); then
    JVM+=(-Dorg.slf4j.simpleLogger.log.org.verbs4j.cm.SetupTimings=debug)
fi
VARIANTS=(current)
[[ -n "$BEFORE" ]] && VARIANTS=(before current)

# VERBS4J := the verbs-perf cm-setup command of variant $1 (before: the classes of --before
# first), recording target/cm-setup/$2.jfr with --jfr
verbs4j() {
    local cp=$JAR
    [[ $1 == before ]] && cp="$BEFORE:$JAR"
    VERBS4J=("${JVM[@]}")
    ((JFR)) && VERBS4J+=("-XX:StartFlightRecording:filename=$OUT/$2.jfr,settings=profile")
    VERBS4J+=(-cp "$cp" org.verbs4j.perf.VerbsPerf cm-setup)
}

# the label of variant $1 in the table
mark() { if [[ $1 == before ]]; then echo "before: "; fi; }

# the seconds left of the budget
left() { echo $((END - SECONDS > 1 ? END - SECONDS : 1)); }

# one line of the table: on stdout and in the summary
say() { echo "$*" | tee -a "$SUMMARY"; }

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
        /^([0-9:.]+ )?(create id|bind addr|resolve addr|resolve route|create qp|connect) *:/ {
            sub(/^([0-9:.]+ )?(create id|bind addr|resolve addr|resolve route|create qp|connect) *:/, "")
            split($0, a, " "); ms += a[1]
        }
        END { if (ms > 0) printf "%d connections in %.1f ms = %.1f connects/s\n", n, ms, n / (ms / 1000); else print "no result" }
    ' "$1"
}

# verbs4j's step timings in $1 (--profile) -> one line per step: count, total ms, mean us, over
# all rounds and over the last round alone (after its "ROUND r" line)
step_summary() {
    ((PROFILE)) || return 0
    awk '/^ROUND / { delete lc; delete lt; next }
        / step .* us on / {
            sub(/^.* step /, ""); i = index($0, " us on "); head = substr($0, 1, i - 1)
            n = split(head, w, " "); us = w[n]; name = substr(head, 1, length(head) - length(us) - 1)
            c[name]++; t[name] += us; lc[name]++; lt[name] += us
        }
        END { for (k in c) printf "    %-28s %6d x %10.1f ms  mean %8.0f us | last round %5d x %9.1f ms  mean %8.0f us\n",
                k, c[k], t[k] / 1000, t[k] / c[k], lc[k], lt[k] / 1000, lc[k] ? lt[k] / lc[k] : 0 }' "$1" |
        sort | tee -a "$SUMMARY"
}

# cmtime, each line time-stamped (--profile), bounded by the budget
run_cmtime() {
    if ((PROFILE)); then
        timeout "$(left)" stdbuf -oL cmtime "$@" 2>&1 | while IFS= read -r l; do printf '%s %s\n' "$(date +%T.%3N)" "$l"; done
    else
        timeout "$(left)" cmtime "$@" 2>&1
    fi
}

# starts a cmtime server on port $1 (its pid appended to SERVERS)
SERVERS=()
cmtime_server() {
    timeout "$(left)" cmtime -b "$ADDR" -p "$1" >"$OUT/cmtime-server-$1.out" 2>&1 &
    SERVERS+=($!)
    await_listener "$1"
}

stop_servers() {
    local p
    for p in "${SERVERS[@]}"; do
        kill "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
    SERVERS=()
}
trap stop_servers EXIT

# the timeline of one connect (after two to warm up): each connection-manager event, with the time
# it was dispatched, from verbs4j's debug log
PORT=$((PORT + 1))
cmtime_server "$PORT"
cmtime_server $((PORT + 1))
cmtime_server $((PORT + 2))
timeout "$(left)" java --enable-native-access=ALL-UNNAMED -Dorg.slf4j.simpleLogger.log.org.verbs4j.cm=debug \
    -Dorg.slf4j.simpleLogger.showDateTime=true -Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS \
    -cp "$JAR" org.verbs4j.perf.VerbsPerf cm-setup -s "$ADDR" -p "$PORT" -c 1 --api blocking --rounds 3 \
    >"$OUT/timeline.out" 2>&1 || rc=1
stop_servers
PORT=$((PORT + 2))
echo "one connect, third of three in one JVM (verbs4j blocking -> cmtime):"
awk '/connects\/s/ { if (++k == 3) print; next } k == 2 && /cm event|step /' "$OUT/timeline.out" | sed 's/^/  /'
for n in $COUNTS; do
    if ((END - SECONDS < 60)); then
        say "N = $n skipped: less than a minute of the --budget of $BUDGET s was left"
        rc=1
        continue
    fi
    say "N = $n"
    # cmtime -> cmtime
    PORT=$((PORT + 1))
    cmtime_server "$PORT"
    run_cmtime -s "$ADDR" -p "$PORT" -c "$n" >"$OUT/cmtime-cmtime-$n.out" || true
    stop_servers
    say "cmtime -> cmtime   cmtime active:   $(cmtime_rate "$OUT/cmtime-cmtime-$n.out" "$n")"
    # verbs4j -> cmtime, the rounds of each against fresh cmtime servers
    for v in "${VARIANTS[@]}"; do
        for api in async blocking; do
            PORT=$((PORT + 1))
            for ((r = 0; r < ROUNDS; r++)); do
                cmtime_server $((PORT + r))
            done
            f="$v-verbs4j-$api-cmtime-$n"
            verbs4j "$v" "$f"
            timeout "$(left)" "${VERBS4J[@]}" -s "$ADDR" -p "$PORT" -c "$n" --api "$api" --threads "$THREADS" \
                --rounds "$ROUNDS" >"$OUT/$f.out" 2>"$OUT/$f.log" || rc=1
            stop_servers
            PORT=$((PORT + ROUNDS - 1))
            grep -h 'active:.*connects/s\|^first failure' "$OUT/$f.out" | sed "s/^/$(mark "$v")verbs4j -> cmtime  /" |
                tee -a "$SUMMARY"
            step_summary "$OUT/$f.log"
        done
    done
    # cmtime -> verbs4j: the rounds of cmtime's client, one after another, against one verbs-perf server
    for v in "${VARIANTS[@]}"; do
        for api in async blocking; do
            PORT=$((PORT + 1))
            f="$v-cmtime-verbs4j-$api-$n"
            verbs4j "$v" "$f"
            timeout "$(left)" "${VERBS4J[@]}" -b "$ADDR" -p "$PORT" -c "$n" --api "$api" --threads "$THREADS" \
                --rounds "$ROUNDS" >"$OUT/$f.out" 2>"$OUT/$f.log" &
            srv=$!
            await_listener "$PORT" || true
            for ((r = 0; r < ROUNDS; r++)); do
                run_cmtime -s "$ADDR" -p "$PORT" -c "$n" >"$OUT/$v-cmtime-client-$api-$n-$r.out" || true
            done
            wait "$srv" || rc=1
            for ((r = 0; r < ROUNDS; r++)); do
                say "$(mark "$v")cmtime -> verbs4j  $(grep -h 'passive:.*connects/s' "$OUT/$f.out" | sed -n "$((r + 1))p")"
                say "                   (cmtime active:  $(cmtime_rate "$OUT/$v-cmtime-client-$api-$n-$r.out" "$n"))"
            done
            step_summary "$OUT/$f.log"
            if ((PROFILE)); then
                grep -hE '^[0-9:.]+ (resolving|creating|connecting|disconnecting|destroying)' \
                    "$OUT/$v-cmtime-client-$api-$n"-*.out | sed 's/^/    cmtime client: /' | tee -a "$SUMMARY"
            fi
        done
    done
done
exit $rc
