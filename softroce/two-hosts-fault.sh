#!/usr/bin/env bash
# two-hosts-fault.sh — the fault tier: two Soft-RoCE guests on one qemu socket network; the server's
# guest is SIGKILLed in the middle of a stream of RDMA WRITEs and SENDs, then restarted.
#
# Usage: softroce/two-hosts-fault.sh [--timeout SECONDS] [--kill-after N] [--scenario verbs|netty]
#   --timeout S     bound on the whole run, both guests and all waits (default 900)
#   --kill-after N  successful completions the client reports before the kill (default 2000)
#   --scenario S    verbs (default): the steps below; netty: the same steps over the Netty transport
#                   (org.verbs4j.netty.fault.NettyFaultClient/NettyFaultServer, an echo of 4 KiB
#                   writes, more pending than credited; N frames echoed before the kill, after which
#                   the server stops reading, so only the transport's probe can find the kill; the client
#                   checks every promise completes, exceptionCaught and channelInactive within the
#                   bound its retry settings give, RdmaIoHandler.stats() and `rdma res show` back to
#                   the baseline, then an echo checked byte for byte with the restarted server)
#
#   guest B  client, 10.0.0.2, rxe0 on eth0, qemu `-netdev socket,udp=127.0.0.1:PA,localaddr=127.0.0.1:PB`
#   guest A  server, 10.0.0.1, rxe0 on eth0, qemu `-netdev socket,udp=127.0.0.1:PB,localaddr=127.0.0.1:PA`
# (-smp 1 -m 2G each, each with its own tmpfs overlay root; see run-in-guest.sh --net). Each
# guest's Ethernet frames are UDP datagrams between two ports of the host's 127.0.0.1, so A can
# die and a new A bind the same port while B runs on, and a frame the receiver cannot take is
# dropped, as on a wire, and left to rxe's retransmission. Known stall, over UDP as over a TCP
# stream (`listen=`/`connect=`): in the client's guest ~60 packets that rxe handed to eth0 are
# never transmitted (rxe's sent_pkts runs ~60 ahead of eth0's tx_packets, the server's rx_packets
# stops), rxe's requester then waits for those skbs (more than 64 of a QP's out), its
# retransmission timer fires once and is not re-armed, and no error ever completes: the client
# waits until the deadline. Rare in this tier's 2,000 completions (about 1 run in 7 over TCP);
# common in streams of 300,000 (--kill-after 300000: 2 of 3 over TCP, 1 of 10 over UDP). Where
# the packets stop (the guest's virtio-net, qemu) is not known; the progress lines' counters show
# it. No address other than 127.0.0.1 on the host and 10.0.0.x in the guests is used.
#
# Steps (every wait bounded by the overall deadline):
#   1. host: test class path (softroce/test-classpath.sh, snapshot in target/fault-tier/).
#   2. start B (org.verbs4j.fault.FaultClient); once its qemu has bound 127.0.0.1:PB, start A
#      (org.verbs4j.fault.FaultServer). The client retries the out-of-band connect until a deadline.
#   3. when the client has written the marker `streaming` (N successful completions), SIGKILL A's
#      qemu. The client checks that every outstanding wr_id completes exactly once with an error
#      (RETRY_EXC_ERR, then WR_FLUSH_ERR) within 60 s, closes everything, checks `rdma res show`
#      against its baseline and writes `closed`.
#   4. restart A; the client reconnects (new QP) and does a verified exchange (RDMA WRITE + SEND,
#      the server answers with the CRC of what it received).
#   5. print the client's `Fault-tier: N passed, M failed` and the timings.
#
# Exit status: 0 only if the client exited 0 with M == 0 and N > 0 and the restarted server exited 0.
# Output: both consoles stream to stdout, prefixed [A] / [A2] / [B]; also in target/fault-tier/*.log
# (this script's own [fault ...] lines in target/fault-tier/fault.log); target/fault-tier-netty/
# for --scenario netty.
# Crash logs of the guests' JVMs go to target/hs_err/.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
TIMEOUT=900
KILL_AFTER=2000
SCENARIO=verbs
while [[ $# -gt 0 ]]; do
    case "$1" in
    --timeout) TIMEOUT="${2:?--timeout needs a value}"; shift 2 ;;
    --kill-after) KILL_AFTER="${2:?--kill-after needs a value}"; shift 2 ;;
    --scenario) SCENARIO="${2:?--scenario needs a value}"; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "two-hosts-fault.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
[[ "$TIMEOUT" =~ ^[0-9]+$ && "$TIMEOUT" -ge 300 ]] || { echo "--timeout must be >= 300" >&2; exit 2; }
[[ "$KILL_AFTER" =~ ^[0-9]+$ && "$KILL_AFTER" -gt 0 ]] || { echo "bad --kill-after $KILL_AFTER" >&2; exit 2; }
[[ "$SCENARIO" == verbs || "$SCENARIO" == netty ]] || { echo "--scenario must be verbs or netty" >&2; exit 2; }

START=$SECONDS
DEADLINE=$((SECONDS + TIMEOUT))
FAULT_LOG=/dev/null  # then target/fault-tier/fault.log: this script's own lines (.ci/run's digest)
say() { echo "[fault +$((SECONDS - START))s] $*" | tee -a "$FAULT_LOG"; }
die() { echo "[fault] ERROR: $*" | tee -a "$FAULT_LOG" >&2; exit 1; }
left() { echo $((DEADLINE - SECONDS)); }
T0MS=$((${EPOCHREALTIME/./} / 1000))
ms() { echo $((${EPOCHREALTIME/./} / 1000 - T0MS)); }   # milliseconds since the start
secs() { printf '%d.%01d' $(($1 / 1000)) $(($1 % 1000 / 100)); }

# One run at a time per work tree (it owns target/fault-tier; two TCG guests already fill 2 cores).
LOCK="${TMPDIR:-/tmp}/verbs4j-fault.$(printf '%s' "$ROOT" | cksum | cut -d' ' -f1).lock"
exec 9>"$LOCK"
flock -w 60 9 || die "another two-hosts-fault.sh holds $LOCK"

# shellcheck source=../scripts/java25.sh
. "$ROOT/scripts/java25.sh" || die "no Java 25 JDK (see scripts/java25.sh)"
WORK="$ROOT/target/fault-tier"
[[ "$SCENARIO" == verbs ]] || WORK+="-$SCENARIO"
MARKERS="$WORK/markers"
rm -rf "$WORK"
mkdir -p "$WORK" "$MARKERS" "$ROOT/target/hs_err"
FAULT_LOG="$WORK/fault.log"

# ---------------------------------------------------------------------------------------------
# 1. Class path (host).
# ---------------------------------------------------------------------------------------------
# shellcheck source=test-classpath.sh
. "$ROOT/softroce/test-classpath.sh"
build_test_classpath "$ROOT" "$WORK" "$ROOT/mvnw" -B -ntp || die "could not build the test class path"

JAVA=(java --enable-native-access=ALL-UNNAMED -XX:+UseSerialGC -XX:TieredStopAtLevel=1
    "-XX:ErrorFile=$ROOT/target/hs_err/hs_err_pid%p.log" -cp "@CP@")
guest_script() {  # NAME MAIN ARGS...: a script the guest runs, around one JVM
    local name="$1" main="$2"
    shift 2
    # shellcheck disable=SC2016  # (the generated script's own variables, in single quotes)
    {
        echo '#!/usr/bin/env bash'
        echo '# generated by softroce/two-hosts-fault.sh; runs in a Soft-RoCE guest'
        echo 'set -u'
        printf 'CP=%q\n' "$CP"
        echo 'echo "===== rdma res show (before the JVM) ====="; rdma res show'
        printf '%q ' "${JAVA[@]}" "$main" "$@" | sed 's/"\?@CP@"\?/"$CP"/'
        echo
        echo 'rc=$?'
        echo 'echo "===== the JVM exited with status $rc ====="'
        echo 'echo "===== rdma res show (after the JVM) ====="; rdma res show'
        echo 'exit $rc'
    } >"$WORK/$name"
    chmod +x "$WORK/$name"
}
# The JVMs' watchdogs print every thread's Java and kernel stack if they still run this long, so a
# hang says where before the deadline ends it (the client starts ~10 s in, the restarted server ~50 s).
SCENARIO_TAG=""
if [[ "$SCENARIO" == netty ]]; then
    SCENARIO_TAG="scenario netty: "
    guest_script server-run.sh org.verbs4j.netty.fault.NettyFaultServer "$TIMEOUT" "$KILL_AFTER"
    guest_script client-run.sh org.verbs4j.netty.fault.NettyFaultClient 10.0.0.1 "$MARKERS" "$KILL_AFTER" 60 300 $((TIMEOUT - 90))
else
    guest_script server-run.sh org.verbs4j.fault.FaultServer "$TIMEOUT" $((TIMEOUT - 150))
    guest_script client-run.sh org.verbs4j.fault.FaultClient 10.0.0.1 "$MARKERS" "$KILL_AFTER" 32 60 300 $((TIMEOUT - 90))
fi

# ---------------------------------------------------------------------------------------------
# 2. The guests.
# ---------------------------------------------------------------------------------------------
# shellcheck disable=SC2317  # (bound, marker, marker_or_dead: called through wait_for)
bound() { ss -Hlun "sport = :$1" 2>/dev/null | grep -q "127.0.0.1:$1"; }
free_udp_port() {  # a UDP port of 127.0.0.1 that nothing uses, other than $1
    local p
    for _ in $(seq 1 50); do
        p=$((20000 + RANDOM % 20000))
        [[ "$p" != "${1:-}" ]] && ! ss -Huan "( sport = :$p or dport = :$p )" 2>/dev/null | grep -q . &&
            { echo "$p"; return 0; }
    done
    return 1
}
PB="$(free_udp_port)" || die "no free UDP port on 127.0.0.1"
PA="$(free_udp_port "$PB")" || die "no free UDP port on 127.0.0.1"

declare -A GPID=()   # run-in-guest.sh processes by name
# shellcheck disable=SC2317  # (called from the EXIT trap)
cleanup() {
    local n
    for n in "${!GPID[@]}"; do kill -TERM "${GPID[$n]}" 2>/dev/null || true; done
    for n in "${!GPID[@]}"; do timeout 30 tail --pid="${GPID[$n]}" -f /dev/null 2>/dev/null || true; done
}
trap cleanup EXIT
trap 'say "interrupted: stopping the guests"; exit 130' INT TERM HUP

# start NAME IP NET SCRIPT: one guest in the background, console prefixed with [NAME]
start_guest() {
    local name="$1" ip="$2" net="$3" script="$4"
    VERBS4J_GUEST_IP="$ip" VERBS4J_GUEST_MEM=2G VERBS4J_GUEST_CPUS=1 \
        VERBS4J_GUEST_LOG="$WORK/$name-console.log" \
        "$ROOT/softroce/run-in-guest.sh" --timeout "$(left)" --share "$ROOT" --net "$net" \
        --pidfile "$WORK/$name.qemu.pid" -- "bash $WORK/$script" \
        > >(sed -u "s/^/[$name] /") 2>&1 &
    GPID[$name]=$!
}
alive() { kill -0 "${GPID[$1]}" 2>/dev/null; }
# wait_for WHAT SECONDS COMMAND...: poll until COMMAND succeeds, at most SECONDS (WHAT names the
# wait for the reader); 1 past it
wait_for() {
    local secs="$2"
    shift 2
    local until=$((SECONDS + secs))
    ((until > DEADLINE)) && until=$DEADLINE
    while ! "$@"; do
        ((SECONDS < until)) || return 1
        sleep 0.2
    done
}
GRC=""
guest_rc() {  # NAME SECONDS: wait (bounded) for a guest's run-in-guest.sh; its status goes to GRC
    local name="$1" secs="$2"
    GRC=0
    if ! timeout "$secs" tail --pid="${GPID[$name]}" -f /dev/null; then
        GRC="timeout"
        return
    fi
    wait "${GPID[$name]}" || GRC=$?
    unset "GPID[$name]"
}
marker() { [[ -e "$MARKERS/$1" ]]; }
# shellcheck disable=SC2317
marker_or_dead() { marker "$1" || ! alive B; }

say "${SCENARIO_TAG}guest B (client, 10.0.0.2) on UDP 127.0.0.1:$PB, guest A (server, 10.0.0.1) on UDP 127.0.0.1:$PA; timeout ${TIMEOUT}s in all"
T_B=$(ms)
start_guest B 10.0.0.2 "udp:$PB:$PA" client-run.sh
wait_for "B's qemu to bind its port" 60 bound "$PB" || die "guest B's qemu did not bind UDP 127.0.0.1:$PB"
say "B's qemu is up: starting guest A (server, 10.0.0.1)"
T_A=$(ms)
start_guest A 10.0.0.1 "udp:$PA:$PB" server-run.sh

# ---------------------------------------------------------------------------------------------
# 3. Kill A mid-stream.
# ---------------------------------------------------------------------------------------------
fail_run() { say "FAILED: $*"; echo "[fault] FAILED: $*" >&2; }
status=0
T_KILL="" T_ERR="" T_CLOSED="" T_A2=""
if wait_for "streaming" "$(left)" marker_or_dead streaming && marker streaming; then
    T_STREAM=$(ms)
    QPID="$(cat "$WORK/A.qemu.pid" 2>/dev/null || true)"
    if marker first-error; then
        fail_run "the client saw an error completion before the kill"
        status=1
    elif [[ "$QPID" =~ ^[0-9]+$ ]] && grep -q qemu "/proc/$QPID/comm" 2>/dev/null; then
        kill -KILL "$QPID"
        T_KILL=$(ms)
        say "client reported $(cat "$MARKERS/streaming") successful completions: SIGKILLed guest A's qemu (pid $QPID)"
    else
        fail_run "no qemu process for guest A (pid file: '${QPID}')"
    fi
    guest_rc A 60
    say "guest A's run-in-guest.sh ended with status $GRC (125 expected: killed, no status)"
    if [[ -n "$T_KILL" ]]; then
        wait_for "first-error" 120 marker_or_dead first-error && marker first-error && T_ERR=$(ms)
        wait_for "closed" 120 marker_or_dead closed && marker closed && T_CLOSED=$(ms)
        [[ -n "$T_ERR" ]] && say "the client saw its first error completion $(secs $((T_ERR - T_KILL))) s after the kill (host clock, ±0.2 s)"
    fi
    if [[ -n "$T_CLOSED" ]]; then
        # -------------------------------------------------------------------------------------
        # 4. Restart A.
        # -------------------------------------------------------------------------------------
        say "the client closed everything: restarting guest A"
        T_A2=$(ms)
        start_guest A2 10.0.0.1 "udp:$PA:$PB" server-run.sh
    else
        fail_run "the client never wrote the marker 'closed' (see [B] above)"
    fi
else
    fail_run "the client never reported ${KILL_AFTER} successful completions (B alive: $(alive B && echo yes || echo no))"
fi

# ---------------------------------------------------------------------------------------------
# 5. Results.
# ---------------------------------------------------------------------------------------------
guest_rc B "$(($(left) > 0 ? $(left) : 1))"
brc=$GRC
T_DONE=$(ms)
a2rc="not started"
if [[ -n "$T_A2" ]]; then guest_rc A2 60; a2rc=$GRC; fi
for n in "${!GPID[@]}"; do  # anything still running is past its time
    say "stopping guest $n"
    kill -TERM "${GPID[$n]}" 2>/dev/null || true
done

line="$(grep -ao 'Fault-tier: [0-9]* passed, [0-9]* failed' "$WORK/B-console.log" 2>/dev/null | tail -n1 || true)"
[[ -n "$line" ]] || line="Fault-tier: 0 passed, 1 failed (the client printed no result)"
echo "$line" | tee -a "$FAULT_LOG"
t() { if [[ -n "$2" ]]; then printf '%s=%ss ' "$1" "$(secs "$2")"; fi; }
say "timings (host clock, s from the start): $(t B-start "$T_B")$(t A-start "$T_A")$(t streaming "${T_STREAM:-}")$(t kill "$T_KILL")$(t first-error "$T_ERR")$(t closed "$T_CLOSED")$(t A2-start "$T_A2")$(t B-done "$T_DONE")total=$(secs "$(ms)")s"
say "client guest B: status $brc; restarted server guest A2: status $a2rc; consoles in ${WORK#"$ROOT/"}/*-console.log"

passed="$(sed -n 's/^Fault-tier: \([0-9]*\) passed.*/\1/p' <<<"$line")"
failed="$(sed -n 's/^Fault-tier: [0-9]* passed, \([0-9]*\) failed.*/\1/p' <<<"$line")"
[[ "$brc" == 0 ]] || { fail_run "the client guest exited with status $brc"; status=1; }
[[ "$a2rc" == 0 ]] || { fail_run "the restarted server guest exited with status $a2rc"; status=1; }
((failed == 0 && passed > 0)) || { fail_run "$line"; status=1; }
[[ -n "$T_KILL" && -n "$T_CLOSED" ]] || status=1
exit $status
