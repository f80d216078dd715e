#!/usr/bin/env bash
# perftest-compare.sh — verbs-perf against perftest 4.5, test by test, on one device, in one run.
#
# For every test (write_bw write_lat read_bw read_lat send_bw send_lat atomic_bw atomic_lat) and
# size it runs the client/server pairs given by --pairs, each client and server a separate process
# on this host (loopback through the RDMA device):
#   pt-pt  perftest client, perftest server       (the baseline: perftest against itself)
#   vp-vp  verbs-perf client, verbs-perf server   (the side-by-side comparison)
#   vp-pt  verbs-perf client, perftest server     (wire compatibility, one way)
#   pt-vp  perftest client, verbs-perf server     (wire compatibility, the other way)
#   pt-pt.2, pt-pt.3, ...  perftest against itself again: with two or more, `compare` takes the
#          band perftest's own runs span as its noise and says of each other row whether it lies
#          in it (order the pairs so that the repeats bracket the others: "pt-pt vp-pt pt-vp pt-pt.2")
#   pt-pt.ctl  the control: perftest against itself once more, judged like a verbs-perf pair against
#          the band of pt-pt and pt-pt.N and counted apart, so that `compare` shows how often perftest
#          itself lands outside its own noise by the same rule ("pt-pt vp-pt pt-pt.ctl pt-vp pt-pt.2")
#   vp-pt.u, pt-vp.u, vp-vp.u  the same pair with verbs-perf in verbs4j's unchecked mode
#          (-Dverbs4j.unchecked=true: no semantic checks, every check that keeps the JVM safe), so that
#          one boot compares both modes, run by run ("pt-pt vp-pt pt-pt.ctl vp-pt.u pt-pt.2")
# with the same options for both tools (sizes, iterations, tx depth, CQ moderation, inline and
# warm-up are perftest's defaults unless --extra sets them, for both). Each verbs-perf side runs
# all its runs in ONE JVM (verbs-perf --batch), so the JVM starts once per pair and role.
# Then the side-by-side report (benchmarks' PerfCompare) prints both tools' parameters, the ratio table against pt-pt, checks
# every verbs-perf JSON report against its printed rows, and (with --png) draws the plots.
# Exit status: 0 when every run with verbs-perf on either side succeeded and its numbers parse (a
# failure of perftest against itself is reported as the baseline's, not counted); 1 otherwise.
#
# Usage (on a host with an RDMA device, or inside the Soft-RoCE guest; --guest boots one):
#   benchmarks/perftest-compare.sh [--guest] [--pairs "pt-pt vp-vp vp-pt pt-vp"] [--tests "..."]
#       [--bw-sizes "2 4096 65536"] [--lat-sizes "2 4096 65536"] [--bw-iters 5000] [--lat-iters 1000]
#       [--extra "perftest options for both tools"] [--out DIR] [--png DIR] [--timeout SEC] [--rdma-cm]
#       [--bw-extra "options for the bandwidth tests only"] [--lat-extra "... latency tests only"]
#       [--warm-runs K] [--repeats R] [--settle SEC] [--interleave] [--budget SEC]
# --warm-runs K: each run is preceded by K identical runs (same options, same pair, same process
# for verbs-perf, a fresh one for perftest) whose output is discarded (in OUT/warm/), for every
# pair and so for both tools alike: under TCG the JVM's JIT takes seconds to compile the loops,
# which a C program does not need; the measured run then starts with the code compiled. With
# K > 0 the first test also runs once more in full (its warm and measured runs) before all, discarded.
# --repeats R: after the pass over all tests and sizes (with its warm runs), R - 1 more passes of
# the measured runs alone, for every pair alike (a fresh perftest process per run, as always; the
# same JVM for verbs-perf); `compare` then takes each pair's best run of each test and size (the
# highest BW average, the lowest t_typical) for both tools. In the TCG guest both tools' runs
# fall now and then into a slower spell of the machine that lasts seconds (perftest's own 2 B
# write_lat: 10.8-11.5 us in most runs, 16-21 us in some): one run per tool and row makes the
# ratio table a draw of those spells; passes minutes apart make a row's R runs land in different ones.
# --interleave: run by run instead of pair by pair: every run (warm ones included) is done by each
# pair in turn, in --pairs order, before the next run starts ("pt-pt vp-pt pt-vp pt-pt.2": each
# verbs-perf row then lies between two runs of perftest against itself of the same test and size,
# seconds apart instead of a whole pass apart, so the machine's drift over minutes widens neither
# perftest's band nor the comparison). Each verbs-perf role still runs all its runs in one JVM: it
# reads its batch from a named pipe that this script feeds one run at a time, waiting (a blocking
# read, no polling) for the run's "done" line on a second pipe; with --settle the JVM's JIT is idle after each run too, and between its
# runs the JVM is stopped (SIGSTOP, SIGCONT before its next run), so that no idle JVM's threads
# share a vCPU with another pair's run, as when the pairs run one after another. Each run of a pair
# also appends its deltas of the device's port counters (rxe: packets, retransmissions, duplicates,
# RNR NAKs) and of every CPU's user/system/softirq time to OUT/PAIR.counters; with or without
# --interleave, a perftest client's own user and system time goes to OUT/PAIR.cputime.
# With --interleave each measured run prints a "row" line as it completes (every pair's BW average
# or t_typical, and verbs-perf's ratio to the mean of perftest's runs against itself).
# --budget SEC: with --interleave, no run starts once SEC seconds have passed since the start; the
# report then covers the runs done (a row is only reported once all its pairs ran it).
# --extra "-D SEC" (duration mode) drops -n (--bw-iters/--lat-iters) from both tools' options;
# -q N and -b go through as given (with -b the server's report lands in PAIR.server.log).
# --rdma-cm: both tools with -R (perftest's rdma_cm mode: QP and messages over rdma_cm); a server
# counts as listening once `rdma resource show cm_id` lists a LISTEN id on the port.
# Environment: VERBS4J_PERF_DEV (device, default the first), VERBS4J_PERF_GID (-x, default 1 in
# the guest, else none), VERBS4J_PERF_JAVA_OPTS (extra JVM options), VERBS4J_PERF_JIT_OPTS (default
# -XX:PerMethodTrapLimit=0 and verbs4j's compile thresholds at 0.02, below), VERBS4J_GUEST_IP,
# VERBS4J_PERF_PIN (auto|on|off: each client and server process, both tools, on one CPU; auto = in a
# multi-vCPU guest), VERBS4J_PERF_PAUSE (on|off, default on: the SIGSTOP between a JVM's
# interleaved runs, above; off leaves the idle JVM running beside the other pairs' runs),
# VERBS4J_PERF_RESUME_LEAD (seconds, default 0: with the stop, how long to wait after a JVM's SIGCONT
# before feeding it its run), VERBS4J_PERF_MARKS (set: with --interleave, a "mark start PAIR RUN" and
# "mark end PAIR RUN" line around each pair's run, for softroce/tcg-sampler.py's timeline).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PAIRS="pt-pt vp-vp vp-pt pt-vp"
TESTS="write_bw write_lat read_bw read_lat send_bw send_lat atomic_bw atomic_lat"
BW_SIZES="2 4096 65536"
LAT_SIZES="2 4096 65536"
BW_ITERS=5000
LAT_ITERS=1000
EXTRA=""
BW_EXTRA=""
LAT_EXTRA=""
OUT=""
PNG=""
TIMEOUT=60
GUEST=0
GUEST_TIMEOUT=900
RDMA_CM=0
WARM=0
REPEATS=1
SETTLE=30
INTERLEAVE=0
BUDGET=0
ARGS=("$@")
while [[ $# -gt 0 ]]; do
    case "$1" in
        --guest) GUEST=1 ;;
        --guest-timeout) GUEST_TIMEOUT=$2; shift ;;
        --pairs) PAIRS=$2; shift ;;
        --tests) TESTS=$2; shift ;;
        --bw-sizes) BW_SIZES=$2; shift ;;
        --lat-sizes) LAT_SIZES=$2; shift ;;
        --bw-iters) BW_ITERS=$2; shift ;;
        --lat-iters) LAT_ITERS=$2; shift ;;
        --extra) EXTRA=$2; shift ;;
        --bw-extra) BW_EXTRA=$2; shift ;;
        --lat-extra) LAT_EXTRA=$2; shift ;;
        --out) OUT=$2; shift ;;
        --png) PNG=$2; shift ;;
        --timeout) TIMEOUT=$2; shift ;;
        --rdma-cm) RDMA_CM=1 ;;
        --warm-runs) WARM=$2; shift ;;
        --repeats) REPEATS=$2; shift ;;
        --settle) SETTLE=$2; shift ;;
        --interleave) INTERLEAVE=1 ;;
        --budget) BUDGET=$2; shift ;;
        -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "perftest-compare: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done

# the tool (module perf) and the side-by-side report (module benchmarks: PerfCompare)
JAR="$ROOT/perf/target/verbs-perf.jar"
BENCH_JAR="$ROOT/benchmarks/target/verbs4j-benchmarks.jar"
for j in "$JAR" "$BENCH_JAR"; do
    [[ -s "$j" ]] || { echo "perftest-compare: $j is missing (./mvnw -B -q package -DskipTests)" >&2; exit 2; }
done

if [[ $GUEST == 1 ]]; then
    # re-run this script inside a fresh Soft-RoCE guest, without --guest
    rest=()
    skip=0
    for a in "${ARGS[@]}"; do
        if [[ $skip == 1 ]]; then skip=0; continue; fi
        case "$a" in
            --guest) ;;
            --guest-timeout) skip=1 ;;
            *) rest+=("$a") ;;
        esac
    done
    quoted=""
    [[ ${#rest[@]} -eq 0 ]] || quoted=$(printf ' %q' "${rest[@]}")
    envs=""
    for v in ${!VERBS4J_PERF_@}; do envs+=" $v=$(printf '%q' "${!v}")"; done
    echo "perftest-compare: booting a Soft-RoCE guest (qemu; ~30 s under TCG), then the runs" >&2
    # the guest's clock from the cycle counter (tsc), not hpet: see docs/benchmarking.md
    VERBS4J_GUEST_KERNEL_ARGS="${VERBS4J_GUEST_KERNEL_ARGS-tsc=reliable clocksource=tsc}" \
        exec "$ROOT/softroce/run-in-guest.sh" --timeout "$GUEST_TIMEOUT" --share "$ROOT" -- \
        "cd $(printf '%q' "$ROOT") &&${envs:+ env$envs} benchmarks/perftest-compare.sh$quoted"
fi

# shellcheck source=../scripts/java25.sh disable=SC1091
[[ -n "${JAVA_HOME:-}" ]] || source "$ROOT/scripts/java25.sh"
DEV=${VERBS4J_PERF_DEV:-$(ibv_devices 2>/dev/null | awk 'NR > 2 && NF >= 1 { print $1; exit }')}
[[ -n "$DEV" ]] || { echo "perftest-compare: no RDMA device" >&2; exit 1; }
GID=${VERBS4J_PERF_GID:-}
[[ -n "$GID" || "${VERBS4J_GUEST:-}" != 1 ]] || GID=1
IP=${VERBS4J_GUEST_IP:-$(hostname -I 2>/dev/null | awk '{print $1}')}
PORT=18515
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/perftest-compare.XXXXXX")}
mkdir -p "$OUT"
rm -rf "$OUT"/*.out "$OUT"/*.json "$OUT"/*.log "$OUT"/*.batch "$OUT"/*.stdout "$OUT"/*.attempt "$OUT/warm" \
    "$OUT/conditions.txt" "$OUT/compare.txt"
mkdir -p "$OUT/warm"
COMMON="-d $DEV${GID:+ -x $GID} -p $PORT"
[[ $RDMA_CM == 0 ]] || COMMON+=" -R"
# -XX:PerMethodTrapLimit=0 (VERBS4J_PERF_JIT_OPTS to change; empty: the JVM's defaults): C2 compiles
# the branches it has not seen taken instead of trapping on them. The end of a run is such a branch,
# taken once per run: with the default the trap there threw the compiled loop away at the end of
# every run and the next run's sample overlapped its recompilation (verbs-perf write_bw client at
# 4 KiB in the guest: 0.69 of perftest with the default, 0.90 with it). Not -XX:-TieredCompilation:
# it compiles less, but in CI the 2-byte write_lat rows went from 1.14-1.45 to 1.89-1.94 of perftest
# (unverified guess: without tiers a run's loop, one call per run, enters its compiled OSR version
# only after ~14,000 interpreted passes instead of within 1,024).
#
# And, with --settle (the default) and as root (the guest), -XX:ThreadPriorityPolicy=1
# -XX:CompilerThreadPriority=19: the JIT compiler threads at nice 19. A pinned JVM shares its one
# CPU with its compiler threads (VERBS4J_PERF_PIN below), and under TCG its JIT is still compiling
# the loop's methods during the measured runs: their thresholds are crossed in those runs (a run
# is only ~10,000 operations at the guest's rates) and the compile queue is hundreds of methods
# long. Measured in the guest (verbs-perf send_bw client at 4 KiB, -D 4 -f 1, one warm run): the compiler threads ran 300-3,200 ms of CPU during the 4 s loops, and the run's BW fell
# with it (0.67 of perftest with 1.8 s, 1.0 with 0.5 s). At nice 19 they get ~1.5% of the CPU
# while the loop busy-polls (70-160 ms per loop), and catch up in the untimed settle between runs
# (JitSettle waits for them there). Not root: a warning and no effect, so not set.
#
# And -XX:CompileCommand=CompileThresholdScaling,org.verbs4j.*::*,0.02: verbs4j's methods (the
# library's and verbs-perf's own) reach the JIT's tiers after 1/50 of the usual invocations. A
# bandwidth run polls once per CQ moderation (100 posts), ~200 times in a 4 s run under TCG, so
# without it the poll path (PerfSide.pollOnce, CompletionQueue.poll and credit) was still
# interpreted in the fourth measured run (-Xlog:jit+compilation: pollOnce at tier 3
# 184 s into the JVM, CompletionQueue.poll 210 s, in its seventh 4 s loop) and the loop's thread
# spent 210-350 ms of each measured loop in user mode, against ~140 ms for perftest's loop: time
# taken from Soft-RoCE's in-kernel work on the same vCPU. With 0.02 the loop (`pass`, the poll path
# inlined) is at C2 before the first measured run and the loop's user time is 20-140 ms (0.05: the
# first measured loop still 350 ms). The JDK's code keeps its thresholds, so the JIT queue is not
# flooded; PerMethodTrapLimit=0 keeps the early C2 code from trapping on paths its short profile
# has not seen.
JIT_NICE_OPTS=""
if ((SETTLE > 0)) && [[ $(id -u) == 0 ]]; then JIT_NICE_OPTS=" -XX:ThreadPriorityPolicy=1 -XX:CompilerThreadPriority=19"; fi
# VERBS4J_PERF_JIT_IDLE=on|off (default on where the nice 19 above applies and chrt exists): with
# --interleave, before each run a verbs-perf JVM's compiler threads go to SCHED_IDLE (chrt -i). At
# nice 19 they still took 40-110 ms of each 4 s bandwidth loop and 10-20 ms of each ~1 s latency
# loop from the loop's pinned vCPU ("the loop's thread ... other JVM threads during the loop" in
# the client's log; 10-30 ms at SCHED_IDLE):
# compiles that the run's own set-up and its first passes trigger after the settle (e.g. the run's
# method reaching C2 on its fourth call). SCHED_IDLE's weight is 3 against nice 19's 15. On real
# hardware, unpinned, those threads take another core; pinning is a guest-only workaround (below).
JIT_IDLE=off
if [[ -n $JIT_NICE_OPTS ]] && command -v chrt >/dev/null; then JIT_IDLE=${VERBS4J_PERF_JIT_IDLE:-on}; fi
JIT_SCALE_OPTS=" -XX:CompileCommand=quiet -XX:CompileCommand=CompileThresholdScaling,org.verbs4j.*::*,0.02"
JIT_OPTS=${VERBS4J_PERF_JIT_OPTS--XX:PerMethodTrapLimit=0$JIT_SCALE_OPTS$JIT_NICE_OPTS}
# shellcheck disable=SC2086,SC2206  # the option strings split at spaces on purpose
VP=(java --enable-native-access=ALL-UNNAMED $JIT_OPTS ${VERBS4J_PERF_JAVA_OPTS:-} -cp "$JAR")
# VERBS4J_PERF_PIN=auto|on|off: each server process on the last CPU and each client process on
# the first, perftest's and verbs-perf's alike (equal terms). auto = on in the guest when it has
# more than one vCPU: under multi-threaded TCG a JVM patching compiled code that another vCPU is
# executing can die of SIGILL (seen in CI: C1 code of Gate.tryEnter); with all of a
# JVM's threads on one vCPU, TCG sees each code write before the next instruction runs. (The JVM
# then shares its vCPU with its JIT compiler threads, which perftest does not need.)
PIN=${VERBS4J_PERF_PIN:-auto}
NCPU=$(nproc 2>/dev/null || echo 1)
if [[ $PIN == auto ]]; then
    PIN=off
    if [[ "${VERBS4J_GUEST:-}" == 1 && $NCPU -gt 1 ]] && command -v taskset >/dev/null; then PIN=on; fi
fi
PIN_SERVER=()
PIN_CLIENT=()
if [[ $PIN == on ]]; then
    PIN_SERVER=(taskset -c $((NCPU - 1)))
    PIN_CLIENT=(taskset -c 0)
fi
vp_argv() { # pair role -> VP_ARGV: the verbs-perf command of that role; a pair ending in .u runs unchecked
    local pin=("${PIN_CLIENT[@]}") mode=()
    if [[ $2 == server ]]; then pin=("${PIN_SERVER[@]}"); fi
    if [[ $1 == *.u ]]; then mode=(-Dverbs4j.unchecked=true); fi
    VP_ARGV=("${pin[@]}" "${VP[@]}" "${mode[@]}" org.verbs4j.perf.VerbsPerf)
}
T0=$SECONDS
say() { echo "[perftest-compare +$((SECONDS - T0))s] $*" >&2; }

# the runs: "test size iterations dir" (dir: warm/ for a discarded warm run, else .)
RUNS=()
FIRST_PASS=()
for t in $TESTS; do
    case $t in
        atomic_*) sizes=8 ;;
        *_bw) sizes=$BW_SIZES ;;
        *) sizes=$LAT_SIZES ;;
    esac
    iters=$LAT_ITERS
    [[ $t != *_bw ]] || iters=$BW_ITERS
    for s in $sizes; do
        for ((w = 0; w < WARM; w++)); do RUNS+=("$t $s $iters warm"); done
        RUNS+=("$t $s $iters .")
        # with warm runs, the first test runs once more in full before, discarded, for every pair: a
        # JVM's first test still ran slower in every TCG boot (vp-pt 0.77-0.90 of perftest against
        # 0.98-1.00 for the second test in the same JVM)
        if [[ $WARM -gt 0 && $t == "${TESTS%% *}" ]]; then
            for ((w = 0; w <= WARM; w++)); do FIRST_PASS+=("$t $s $iters warm"); done
        fi
    done
done
MEASURED=()
for r in "${RUNS[@]}"; do
    if [[ $r != *" warm" ]]; then MEASURED+=("$r"); fi
done
for ((p = 2; p <= REPEATS; p++)); do
    for r in "${MEASURED[@]}"; do RUNS+=("$r r$p"); done
done
RUNS=("${FIRST_PASS[@]}" "${RUNS[@]}")

# waits until a server listens on the port, at most TIMEOUT s (status 1 past it); with a pid (a
# perftest server started in the background), returns 2 at once when that process has ended (e.g. it
# refused its options: perftest's "please check that DURATION > 2*MARGIN") instead of waiting out the bound
waitport() {
    local i
    for ((i = 0; i < 5 * TIMEOUT; i++)); do
        if [[ -n ${1:-} ]] && ! kill -0 "$1" 2>/dev/null; then
            return 2
        fi
        if [[ $RDMA_CM == 1 ]]; then
            rdma resource show cm_id 2>/dev/null | grep -q "state LISTEN .*:$PORT\b" && return 0
            sleep 0.2
            continue
        fi
        ss -ltn 2>/dev/null | awk -v p=":$PORT" '$4 ~ p"$" { f = 1 } END { exit !f }' && return 0
        sleep 0.2
    done
    return 1
}

# perftest under TCG sometimes cannot calibrate its cycle counter ("Can't produce a report") and
# quits: every run is tried 1 + VERBS4J_PERF_RETRIES times (default 1), perftest's by this script,
# verbs-perf's by --batch --retries (single-threaded TCG, as CI uses, fails the calibration more often)
RETRIES="${VERBS4J_PERF_RETRIES:-1}"
# --settle SEC (default 30; 0: off): each verbs-perf run waits first until its JVM's JIT compiler is
# idle, at most SEC, and waits so again before timing (--jit_settle): a client after the handshake,
# before its loop; a server with a timed loop (write_lat, send_lat, send_bw) before the last barrier,
# where its peer waits untimed (JitSettle: no traffic meanwhile; in a TCG guest the JVM compiles for
# tens of seconds after its start, on the vCPU its measured thread is pinned to)
retry() { # command... (the last attempt's status)
    local a rc=0
    for ((a = 0; a <= RETRIES; a++)); do
        rc=0
        "$@" && return 0 || rc=$?
        [[ $a == "$RETRIES" ]] || echo "perftest-compare: '$*' failed (exit $rc): again" >&2
    done
    return $rc
}

opts() { # test size iters -> the options both tools get (no -n with -D: duration mode)
    local s="" n="-n $3" x="$EXTRA"
    [[ $1 == atomic_* ]] || s="-s $2"
    if [[ $1 == *_bw ]]; then x+="${BW_EXTRA:+ $BW_EXTRA}"; else x+="${LAT_EXTRA:+ $LAT_EXTRA}"; fi
    [[ " $x " != *" -D "* && " $x " != *" --duration"* ]] || n=""
    echo "$COMMON $s $n $x"
}

FAIL=0
# a failure of perftest against itself (pt-pt) is perftest's, and reported as such; it does not fail the run
note_fail() {
    case "$*" in
        pt-pt:* | pt-pt.*:*) echo "BASELINE FAILED (perftest against itself): $*" | tee -a "$OUT/baseline-failures.log" >&2 ;;
        *) echo "FAILED: $*" | tee -a "$OUT/failures.log" >&2; FAIL=1 ;;
    esac
}

stop_tree() { # pid: ends the process and its descendants, children first (a later wait reaps it;
    # SIGCONT after the SIGTERM: a JVM stopped between its interleaved runs then sees it)
    local c
    for c in $(pgrep -P "$1" 2>/dev/null); do stop_tree "$c"; done
    kill "$1" 2>/dev/null || true
    kill -CONT "$1" 2>/dev/null || true
}

# Every exit path (the end, a failure, SIGINT, SIGTERM, SIGHUP) ends what this script started and
# leaves nothing behind: the perftest servers and clients, the verbs-perf JVMs (a JVM stopped
# between its interleaved runs gets SIGCONT after its SIGTERM), the `timeout`s around them (each in
# a process group of its own, so a Ctrl-C on the terminal does not reach them) and the named pipes.
# A signal is acted on once the command in the foreground returns (at most --timeout s).
FIFO_DIR=""
descendants() { # pid: its descendants, each after its own (this listing's subshell left out)
    local c
    for c in $(pgrep -P "$1" 2>/dev/null); do
        [[ $c != "$BASHPID" ]] || continue
        descendants "$c"
        echo "$c"
    done
}
running() { # pid: alive and not a zombie
    local st
    st=$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null) && [[ -n $st && $st != Z ]]
}
# shellcheck disable=SC2317  # (called from the traps)
cleanup() {
    local rc=$? p i left=() pids=()
    trap - EXIT INT TERM HUP
    # (a command substitution, not < <(...): that needs /dev/fd, which a minimal system may lack)
    # shellcheck disable=SC2207
    pids=($(descendants $$))
    if ((${#pids[@]})); then
        echo "[perftest-compare] exit status $rc: ending ${#pids[@]} process(es) it started" >&2
        for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; kill -CONT "$p" 2>/dev/null || true; done
        for ((i = 0; i < 50; i++)); do
            left=()
            for p in "${pids[@]}"; do if running "$p"; then left+=("$p"); fi; done
            ((${#left[@]})) || break
            sleep 0.1
        done
        for p in "${left[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
    fi
    [[ -z $FIFO_DIR ]] || rm -rf "$FIFO_DIR"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# the batch lines of one run for a verbs-perf server and client: pair "test size iters dir [repeat]"
vp_server_line() {
    local t s n d _
    read -r t s n d _ <<<"$2"
    echo "$t $(opts "$t" "$s" "$n") --timeout $TIMEOUT --jit_settle $SETTLE >> $OUT/$1.server.log"
}
vp_client_line() {
    local t s n d k
    read -r t s n d k <<<"$2"
    echo "$t $(opts "$t" "$s" "$n") --timeout $TIMEOUT --jit_settle $SETTLE --out_json --out_json_file $OUT/$d/${1}__${t}__$s${k:+.$k}.json $IP >> $OUT/$d/${1}__$t.out"
}
# perftest's server of one run for a verbs-perf client, retried (twice the bound: the first run
# also waits for the client JVM to start); a failure goes to failures.log
pt_server_for_vp() { # pair "test size iters dir [repeat]"
    local t s n _
    read -r t s n _ <<<"$2"
    # shellcheck disable=SC2046
    retry timeout $((2 * TIMEOUT)) "${PIN_SERVER[@]}" "ib_$t" $(opts "$t" "$s" "$n") >>"$OUT/$1.server.log" 2>&1 \
        || echo "FAILED: $1: ib_$t -s $s server (exit $?)" >>"$OUT/failures.log"
}

# one run with perftest's client: pair server "test size iters dir [repeat]" (a perftest server is
# started here; a verbs-perf server is already serving this run)
pt_client_run() {
    local pair=$1 server=$2 t s n d o a ok=0 why="" ppid=""
    read -r t s n d _ <<<"$3"
    o=$(opts "$t" "$s" "$n")
    for ((a = 0; a <= RETRIES && ok == 0; a++)); do
        [[ $a == 0 ]] || echo "perftest-compare: $pair $t -s $s failed ($why): again" >&2
        ok=1
        if [[ $server == pt ]]; then
            # shellcheck disable=SC2086
            timeout "$TIMEOUT" "${PIN_SERVER[@]}" "ib_$t" $o >>"$OUT/$pair.server.log" 2>&1 &
            ppid=$!
        fi
        if waitport "$ppid"; then
            # the client's output of a failed attempt is kept apart;
            # its CPU time, user and system, to set beside a verbs-perf loop's own line ("the loop's
            # thread: user .. ms, system .. ms"); bash's time in a subshell of its own, whose only
            # child is the client (here it would also count a server this shell reaps meanwhile)
            local TIMEFORMAT="$3: ib_$t client process: user %U s, system %S s"
            # shellcheck disable=SC2086  # $o: the options, split at spaces
            ( time timeout "$TIMEOUT" "${PIN_CLIENT[@]}" "ib_$t" $o "$IP" >"$OUT/$pair.attempt" 2>&1 ) 2>>"$OUT/$pair.cputime" \
                || { ok=0; why="client exit $?"; }
            if [[ $ok == 1 ]]; then cat "$OUT/$pair.attempt" >>"$OUT/$d/${pair}__$t.out"
            else cat "$OUT/$pair.attempt" >>"$OUT/$pair.failed-attempts.log"; fi
        else
            [[ $? == 2 ]] && why="the server ended before it listened: see $OUT/$pair.server.log" \
                || why="no server listening"
            ok=0
        fi
        if [[ $server == pt ]]; then wait "$ppid" || { ok=0; why="${why:-server failed}"; }; fi
    done
    [[ $ok == 1 ]] || note_fail "$pair: ib_$t -s $s ($why)"
}

# --interleave: the long-lived verbs-perf JVMs, one per verbs-perf role of each pair, each reading
# its batch from a named pipe and writing "done RC" to a second one after each run (key
# "pair.role": FIFO_FD the batch pipe's write end here, DONE_FD the done pipe's read end, FIFO_LOG
# where the JVM's standard error goes, FIFO_PID, FIFO_LINES the runs fed so far, FIFO_DONE the runs
# it reported done). Waiting is a blocking read of the done pipe, not a poll of the log: a poll
# (a grep every 0.1 s) would take CPU beside the very run it waits for, under TCG a lot of it.
declare -A FIFO_FD=() DONE_FD=() FIFO_LOG=() FIFO_PID=() FIFO_LINES=() FIFO_DONE=()
vp_start() { # pair role: starts the JVM (every JVM before any pipe is opened here, so that no JVM
    # inherits another's write end and keeps it from seeing the end of its batch)
    local key="$1.$2" fifo="$FIFO_DIR/$1.$2.fifo" done="$FIFO_DIR/$1.$2.done"
    mkfifo "$fifo" "$done"
    vp_argv "$1" "$2"
    if [[ $2 == server ]]; then
        FIFO_LOG[$key]="$OUT/$1.server.stdout"
        timeout $(((TIMEOUT + SETTLE) * (${#RUNS[@]} + 2) * 2)) "${VP_ARGV[@]}" --batch "$fifo" --retries "$RETRIES" --settle "$SETTLE" --done "$done" >"${FIFO_LOG[$key]}" 2>&1 &
    else
        FIFO_LOG[$key]="$OUT/$1.client.log"
        timeout $(((TIMEOUT + SETTLE) * (${#RUNS[@]} + 2) * 2)) "${VP_ARGV[@]}" --batch "$fifo" --retries "$RETRIES" --settle "$SETTLE" --done "$done" 2>>"${FIFO_LOG[$key]}" &
    fi
    FIFO_PID[$key]=$!
    FIFO_LINES[$key]=0
    FIFO_DONE[$key]=0
}
vp_open() { # pair role: both pipes' ends here (read-write: neither waits for the JVM to open its end)
    local fd dfd
    exec {fd}<>"$FIFO_DIR/$1.$2.fifo"
    exec {dfd}<>"$FIFO_DIR/$1.$2.done"
    FIFO_FD[$1.$2]=$fd
    DONE_FD[$1.$2]=$dfd
}
vp_pause() { # pair role: stops the JVM (SIGSTOP) between its runs: while another pair runs, no idle
    # JVM's threads (JIT, GC, periodic tasks) share the vCPUs with it, as in a run pair by pair
    [[ "${VERBS4J_PERF_PAUSE:-on}" == off ]] || pkill -STOP -P "${FIFO_PID[$1.$2]}" 2>/dev/null || true
}
jit_idle() { # pid of the `timeout` around a JVM: its JVM's JIT compiler threads to SCHED_IDLE
    local jvm t comm
    [[ $JIT_IDLE == on ]] || return 0
    for jvm in $(pgrep -P "$1" 2>/dev/null); do
        for t in /proc/"$jvm"/task/*; do
            read -r comm <"$t/comm" 2>/dev/null || continue
            [[ $comm != C[12]\ CompilerThre* ]] || chrt -i -p 0 "${t##*/}" >/dev/null 2>&1 || true
        done
    done
}
vp_resume() { # pair role (VERBS4J_PERF_RESUME_LEAD: seconds to wait after the SIGCONT of a stopped JVM)
    jit_idle "${FIFO_PID[$1.$2]}"
    pkill -CONT -P "${FIFO_PID[$1.$2]}" 2>/dev/null || true
    if [[ "${VERBS4J_PERF_PAUSE:-on}" != off && "${VERBS4J_PERF_RESUME_LEAD:-0}" != 0 ]]; then
        sleep "$VERBS4J_PERF_RESUME_LEAD"
    fi
}
vp_feed() { # pair role line (resumes the JVM first)
    local key="$1.$2"
    vp_resume "$1" "$2"
    echo "$3" >&"${FIFO_FD[$key]}"
    FIFO_LINES[$key]=$((${FIFO_LINES[$key]} + 1))
}
vp_wait() { # pair role: until the JVM has done every run fed to it; 1 if it died or overran its bound
    # (builtins only: a read of the done pipe that wakes every 5 s to see whether the JVM still lives)
    local key="$1.$2" waited=0 line
    local bound=$(((TIMEOUT + SETTLE) * (RETRIES + 1) + 2 * SETTLE + 30))
    while ((${FIFO_DONE[$key]} < ${FIFO_LINES[$key]})); do
        if read -r -t 5 -u "${DONE_FD[$key]}" line; then
            FIFO_DONE[$key]=$((${FIFO_DONE[$key]} + 1))
            continue
        fi
        waited=$((waited + 5))
        if ((waited >= bound)) || ! kill -0 "${FIFO_PID[$key]}" 2>/dev/null; then
            return 1
        fi
    done
}

# the device's port counters (rxe: RNR NAKs, retries, duplicates, out-of-sequence packets) around
# every run of a pair, nonzero deltas appended to $OUT/PAIR.counters after each CPU's
# user/system/softirq milliseconds (builtins only: no process beside the run); a device without
# hw_counters gives the CPU times alone
HWC_DIR=$(ls -d /sys/class/infiniband/"$DEV"/ports/1/hw_counters 2>/dev/null || true)
declare -A HWC=()
# shellcheck disable=SC2034  # (into: a name reference, the caller's array)
hwc_read() { # NAME: fills the associative array NAME with cpuN.user/.system/.softirq (USER_HZ
    # ticks, /proc/stat) and the device's port counters
    local -n into=$1
    local f v c u n sy sirq _
    into=()
    while read -r c u n sy _ _ _ sirq _; do
        [[ $c == cpu[0-9]* ]] || continue
        into[$c.user]=$((u + n)) into[$c.system]=$sy into[$c.softirq]=$sirq
    done </proc/stat
    for f in ${HWC_DIR:+"$HWC_DIR"/*}; do
        if read -r v <"$f" 2>/dev/null; then into[${f##*/}]=$v; fi
    done
}
hwc_snap() { hwc_read HWC; }
hwc_delta() { # pair "test size iters dir [repeat]": appends this run's nonzero deltas since hwc_snap
    local -A now=()
    local k f i line=""
    hwc_read now
    for ((i = 0; ; i++)); do
        k=cpu$i
        [[ -n "${now[$k.user]:-}" && -n "${HWC[$k.user]:-}" ]] || break
        line+=" $k=$(((now[$k.user] - HWC[$k.user]) * 10))/$(((now[$k.system] - HWC[$k.system]) * 10))/$(((now[$k.softirq] - HWC[$k.softirq]) * 10))ms"
    done
    for f in ${HWC_DIR:+"$HWC_DIR"/*}; do
        k=${f##*/}
        if [[ -n "${now[$k]:-}" && -n "${HWC[$k]:-}" ]] && ((now[$k] != HWC[$k])); then
            line+=" $k=$((now[$k] - HWC[$k]))"
        fi
    done
    echo "$2:${line:- (none)}" >>"$OUT/$1.counters"   # cpuN=user/system/softirq
}

say_row() { # "test size iters dir [repeat]": the row of a measured run, every pair's number of it, as it completes
    local t s rep pair v vals="" unit="us t_typical" col=5
    read -r t s _ _ rep <<<"$1"
    if [[ $t == *_bw ]]; then unit="MB/s BW average" col=4; fi
    [[ $t != atomic_* ]] || s=8
    for pair in $PAIRS; do
        # the pair's last row of that size in its output (perftest's columns: #bytes #iterations ...)
        v=$(awk -v s="$s" -v c="$col" '$1 == s && $2 ~ /^[0-9]+$/ && NF >= c { v = $c } END { print v }' \
            "$OUT/${pair}__$t.out" 2>/dev/null)
        vals+=" $pair=${v:-?}"
    done
    say "row $t -s $s${rep:+ (pass ${rep#r})}:$vals ($unit)$(awk -v pairs="$vals" -v bw="$col" 'BEGIN {
        n = split(pairs, p, " "); base = 0; nb = 0
        for (i = 1; i <= n; i++) { split(p[i], kv, "="); if (kv[1] ~ /^pt-pt(\.[0-9]+)?$/ && kv[2] + 0 > 0) { base += kv[2]; nb++ } }
        if (nb == 0) exit
        base /= nb
        for (i = 1; i <= n; i++) { split(p[i], kv, "="); if (kv[1] ~ /^vp-/ && kv[2] + 0 > 0) printf "; %s / perftest %.2f (%s)", kv[1], kv[2] / base, bw == 4 ? "<1: slower" : ">1: slower" }
    }')"
}

run_interleaved() {
    local pair roles client server r t s dead=""
    # the pipes in a local directory: OUT may be on a file system without named pipes (the guest's share)
    FIFO_DIR=$(mktemp -d "${TMPDIR:-/tmp}/perftest-compare-fifo.XXXXXX")
    for pair in $PAIRS; do
        roles=${pair%%.*}
        client=${roles%-*} server=${roles#*-}
        [[ $server != vp ]] || vp_start "$pair" server
        [[ $client != vp ]] || vp_start "$pair" client
    done
    local key
    for key in "${!FIFO_PID[@]}"; do vp_open "${key%.*}" "${key##*.}"; done
    # (each JVM runs until it blocks on its empty pipe, then stays so until its first run is fed:
    # its start-up is paused only after its first run, like every later gap)
    say "interleaved: ${#RUNS[@]} runs, each by the pairs $PAIRS in turn"
    local k=0 d rep what
    for r in "${RUNS[@]}"; do
        read -r t s _ d rep <<<"$r"
        if ((BUDGET > 0 && SECONDS - T0 >= BUDGET)); then
            say "the budget of $BUDGET s is spent: runs $((k + 1))-${#RUNS[@]} of ${#RUNS[@]} left out; the report covers the runs done"
            echo "left out: runs $((k + 1))-${#RUNS[@]} of ${#RUNS[@]} (--budget $BUDGET s spent)" >>"$OUT/conditions.txt"
            break
        fi
        # a progress line per run: a default run is otherwise silent for minutes
        k=$((k + 1))
        what=measured
        [[ $d != warm ]] || what="warm, discarded"
        [[ -z $rep ]] || what+=", pass ${rep#r}"
        say "run $k of ${#RUNS[@]}: $t -s $s ($what)"
        for pair in $PAIRS; do
            [[ " $dead " != *" $pair "* ]] || continue
            roles=${pair%%.*}
            client=${roles%-*} server=${roles#*-}
            [[ -z "${VERBS4J_PERF_MARKS:-}" ]] || say "mark start $pair $r"
            hwc_snap
            if [[ $server == vp ]]; then
                vp_feed "$pair" server "$(vp_server_line "$pair" "$r")"
            fi
            if [[ $client == vp ]]; then
                local spid=""
                if [[ $server == pt ]]; then
                    pt_server_for_vp "$pair" "$r" &
                    spid=$!
                fi
                vp_feed "$pair" client "$(vp_client_line "$pair" "$r")"
                if vp_wait "$pair" client; then
                    vp_pause "$pair" client
                else
                    note_fail "$pair: the verbs-perf client stopped or overran its bound at $t -s $s (see $OUT/$pair.client.log)"
                    dead+=" $pair"
                    stop_tree "${FIFO_PID[$pair.client]}"
                fi
                if [[ -n "$spid" ]]; then
                    # a perftest server still waiting for a client that will not come: stop it
                    [[ " $dead " != *" $pair "* ]] || stop_tree "$spid"
                    wait "$spid" || true
                fi
            else
                pt_client_run "$pair" "$server" "$r"
            fi
            if [[ $server == vp && " $dead " != *" $pair "* ]]; then
                if vp_wait "$pair" server; then
                    vp_pause "$pair" server
                else
                    note_fail "$pair: the verbs-perf server stopped or overran its bound at $t -s $s (see $OUT/$pair.server.stdout)"
                    dead+=" $pair"
                    stop_tree "${FIFO_PID[$pair.server]}"
                fi
            fi
            hwc_delta "$pair" "$r"
            [[ -z "${VERBS4J_PERF_MARKS:-}" ]] || say "mark end $pair $r"
        done
        [[ $d == warm ]] || say_row "$r"
    done
    # the end of every batch, then each JVM's exit status (its worst run)
    local fd
    for key in "${!FIFO_FD[@]}"; do
        vp_resume "${key%.*}" "${key##*.}"
        fd=${FIFO_FD[$key]}
        exec {fd}>&-
    done
    for key in "${!FIFO_PID[@]}"; do
        if ! wait "${FIFO_PID[$key]}"; then
            if [[ $key == *.client ]]; then
                note_fail "${key%.*}: a verbs-perf client run failed (see $OUT/${key%.*}.client.log)"
            else
                note_fail "${key%.*}: the server side failed (see $OUT/${key%.*}.server.log / .stdout)"
            fi
        fi
        fd=${DONE_FD[$key]}
        exec {fd}<&-
    done
    rm -rf "$FIFO_DIR"
    FIFO_DIR=""
}

run_pair() {
    local pair=$1 r
    local roles=${pair%%.*}
    local client=${roles%-*} server=${roles#*-}
    say "pair $pair ($client client, $server server): ${#RUNS[@]} runs"
    local sbatch="$OUT/$pair.server.batch" cbatch="$OUT/$pair.client.batch" spid=""
    : >"$sbatch"
    : >"$cbatch"
    for r in "${RUNS[@]}"; do
        vp_server_line "$pair" "$r" >>"$sbatch"
        vp_client_line "$pair" "$r" >>"$cbatch"
    done
    if [[ $server == vp ]]; then
        vp_argv "$pair" server
        timeout $(((TIMEOUT + SETTLE) * (${#RUNS[@]} + 2))) "${VP_ARGV[@]}" --batch "$sbatch" --retries "$RETRIES" --settle "$SETTLE" >"$OUT/$pair.server.stdout" 2>&1 &
        spid=$!
    fi
    vp_argv "$pair" client
    if [[ $client == vp && $server == vp ]]; then
        if ! timeout $(((TIMEOUT + SETTLE) * (${#RUNS[@]} + 2))) "${VP_ARGV[@]}" --batch "$cbatch" --retries "$RETRIES" --settle "$SETTLE" 2>>"$OUT/$pair.client.log"; then
            note_fail "$pair: a verbs-perf client run failed (see $OUT/$pair.client.log)"
            stop_tree "$spid"
        fi
    elif [[ $client == vp ]]; then
        # perftest servers one after another; the verbs-perf client retries until each listens
        (
            for r in "${RUNS[@]}"; do pt_server_for_vp "$pair" "$r"; done
        ) &
        spid=$!
        if ! timeout $(((TIMEOUT + SETTLE) * (${#RUNS[@]} + 2))) "${VP_ARGV[@]}" --batch "$cbatch" --retries "$RETRIES" --settle "$SETTLE" 2>>"$OUT/$pair.client.log"; then
            note_fail "$pair: a verbs-perf client run failed (see $OUT/$pair.client.log)"
            # the perftest servers still waiting for this client would each wait out their bound
            stop_tree "$spid"
        fi
    else
        for r in "${RUNS[@]}"; do pt_client_run "$pair" "$server" "$r"; done
    fi
    if [[ -n "$spid" ]]; then
        wait "$spid" || note_fail "$pair: the server side failed (see $OUT/$pair.server.log / .stdout)"
    fi
}

say "device $DEV${GID:+, GID index $GID}, peer address $IP, pairs: $PAIRS, each process pinned to one CPU (server last, client first): $PIN"
say "tests: $TESTS; bw sizes: $BW_SIZES (-n $BW_ITERS); lat sizes: $LAT_SIZES (-n $LAT_ITERS); extra options: ${EXTRA:-none}${BW_EXTRA:+ (bw: $BW_EXTRA)}${LAT_EXTRA:+ (lat: $LAT_EXTRA)}; warm runs before each: $WARM; repeats: $REPEATS"
{
    echo "options of both tools: $COMMON <test's -s/-n> ${EXTRA:-(no extra options)}${BW_EXTRA:+; bandwidth tests: $BW_EXTRA}${LAT_EXTRA:+; latency tests: $LAT_EXTRA}"
    echo "warm runs before each measured run: $WARM (identical, output discarded, every pair alike)$([[ $WARM == 0 ]] || echo "; the first test once more in full before all, discarded")"
    [[ $INTERLEAVE == 0 ]] || echo "interleaved: every run by each pair in turn ($PAIRS), then the next run"
    [[ $REPEATS -le 1 ]] || echo "repeats: every measured run $REPEATS times, in $REPEATS passes over all tests and sizes (the later passes without warm runs), every pair alike; a row is the pair's best run"
    echo "each verbs-perf run starts once its JVM's JIT compiler is idle, and again before timing: a client's loop, a server's timed loop at its last barrier (at most ${SETTLE} s; 0 = not waiting)"
    echo "processes pinned (server last CPU, client first): $PIN ($NCPU CPUs)"
    echo "verbs-perf's JVM options: ${JIT_OPTS:-(the JIT defaults)} ${VERBS4J_PERF_JAVA_OPTS:-}"
    echo "verbs-perf's JIT compiler threads at SCHED_IDLE during interleaved runs: $JIT_IDLE"
} >"$OUT/conditions.txt"
if [[ $INTERLEAVE == 1 ]]; then
    run_interleaved
else
    for p in $PAIRS; do run_pair "$p"; done
fi
[[ ! -s "$OUT/failures.log" ]] || FAIL=1
say "runs done; results in $OUT"
crc=0
# the report is also kept as OUT/compare.txt, which benchmarks/results.py renders into docs/results.md
"${PIN_CLIENT[@]}" java -cp "$BENCH_JAR" org.verbs4j.bench.compare.PerfCompare "$OUT" --json ${PNG:+--png "$PNG"} |
    tee "$OUT/compare.txt" || crc=$?
say "done: runs $([[ $FAIL == 0 ]] && echo ok || echo FAILED), compare exit $crc"
[[ $FAIL == 0 && $crc == 0 ]]
