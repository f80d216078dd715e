#!/usr/bin/env bash
# run-in-guest.sh — run one shell command, as root, in a FRESH Soft-RoCE qemu
# guest (Debian 12's kernel, 6.1, or with VERBS4J_GUEST_KERNEL=6.12 its newest
# 6.12; rdma_rxe device rxe0 ACTIVE) and exit with the command's exit status.
#
# Usage: softroce/run-in-guest.sh [--timeout SECONDS] [--share DIR] [--net MODE:PORT[:PORT]]
#                                 [--pidfile FILE] [--] 'shell command'
#   --timeout S  bound on the whole guest, boot included (default 1800); on
#                expiry qemu is killed and the exit status is 124
#   --share DIR  host folder shared READ-WRITE into the guest at the SAME
#                absolute path; the command starts there
#                (default: the git toplevel of the current folder, else .)
#   --net udp:LOCALPORT:REMOTEPORT | listen:PORT | connect:PORT
#                two hosts: a virtio NIC (eth0) on a qemu socket network with
#                one other guest, on the host's 127.0.0.1 only. udp: each
#                guest's frames are UDP datagrams from LOCALPORT to the other's
#                port (the other guest gives the two ports the other way
#                round); either side may start, die and restart in any order,
#                and a frame the other side cannot take is dropped, as on a
#                real wire. listen/connect: one TCP stream through PORT (the
#                listening guest must be started first; it accepts a new peer
#                when the old one goes away, the connecting one does not
#                reconnect). The fault tier uses udp (see two-hosts-fault.sh
#                for a stall that both can hit). rxe0 is then on eth0 instead
#                of dummy0. Give each guest its own VERBS4J_GUEST_IP (and
#                VERBS4J_GUEST_LOG).
#   --pidfile F  qemu writes its process id to F (e.g. to SIGKILL the guest)
#
# In the guest (see guest-stage2.sh): the host's own root filesystem as an
# overlay (read-only host files, writes go to guest RAM and vanish), fresh
# tmpfs on /tmp and /var/tmp, `ulimit -l unlimited`, lo up, dummy0 with
# VERBS4J_GUEST_IP/24 (no NIC: nothing leaves the guest), rxe0 on dummy0 with
# GID index 1 = ::ffff:VERBS4J_GUEST_IP (RoCE v2). Exported: JAVA_HOME (Temurin
# 25), PATH with $JAVA_HOME/bin first, HOME=/root, VERBS4J_GUEST=1,
# VERBS4J_GUEST_IP.
#
# Output: the guest's serial console (setup lines, kernel errors, and the
# command's stdout+stderr) streams to this script's stdout and is saved to
# ${VERBS4J_GUEST_LOG:-<share>/target/guest-console.log}, with the guest's
# dmesg appended after the run.
#
# Exit status: the command's; 124 if the timeout expired; 125 if the guest
# ended without reporting a status (boot failure, panic, qemu killed, ...).
#
# Boot: the kernel gets arguments suited to an emulated machine on a possibly
# busy host: no_timer_check (the IO-APIC timer check counts timer interrupts
# during a busy wait and panics, "IO-APIC + timer doesn't work!", when the
# host does not run the vCPU's timer in time) and lpj= from the host's TSC
# frequency (the guest's TSC is the host's; no delay-loop calibration, which a
# busy host makes fail). A guest that dies before its command started (a
# panic, a failed setup step; guest-stage2.sh creates the file "started" in
# the control folder just before the command) is booted once more, within the
# same --timeout, with "guest died before the command started (...); retrying
# once" on stderr; the first boot's console is kept beside the log as
# <log>.first-boot. A guest whose command started is never booted again.
# A boot that has not started the command within VERBS4J_GUEST_START_BOUND
# seconds (default 300; a boot takes 10-20 s under TCG) is stopped and
# counts as one that died before the command started: an emulator that hangs
# before the kernel prints anything fails fast or is booted once more, rather
# than holding the whole --timeout.
#
# Environment: VERBS4J_GUEST_KERNEL and VERBS4J_GUEST_CACHE (see build-guest.sh), VERBS4J_GUEST_MEM
# (default 4G), VERBS4J_GUEST_CPUS (default 2), VERBS4J_GUEST_IP (default
# 10.0.0.1), VERBS4J_GUEST_LOG, VERBS4J_GUEST_ACCEL (default
# "tcg,thread=multi,tb-size=512"; e.g. "kvm" with VERBS4J_GUEST_CPU=host on a
# runner with usable KVM), VERBS4J_GUEST_CPU (default max), VERBS4J_GUEST_MAC
# (with --net; default 52:54:00:00:00:<last octet of VERBS4J_GUEST_IP>), VERBS4J_GUEST_KERNEL_ARGS
# (more kernel command-line arguments, e.g. "tsc=reliable clocksource=tsc"),
# VERBS4J_GUEST_MONITOR (a Unix socket path: qemu's human monitor listens
# there, e.g. for `info jit` with softroce/tcg-sampler.py; default: no monitor),
# VERBS4J_GUEST_QEMU_ARGS (more qemu options, split at spaces, e.g. "-plugin
# /tmp/tcg-insn.so,totals=FILE" for softroce/tcg-insn-plugin.c),
# VERBS4J_GUEST_LPJ (the kernel's lpj=; default from the host's "cpu MHz" and
# the guest kernel's CONFIG_HZ; "none" leaves it out), VERBS4J_GUEST_FIRST_BOOT_ARGS
# (kernel arguments for the first boot only, to try the retry: e.g.
# "rdinit=/none" makes the first boot panic before the command).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${VERBS4J_GUEST_CACHE:-$HOME/.cache/verbs4j-guest${VERBS4J_GUEST_KERNEL:+-$VERBS4J_GUEST_KERNEL}}"
TIMEOUT=1800
SHARE=""
NET=""
PIDFILE=""

usage() {
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
}
while [[ $# -gt 0 ]]; do
    case "$1" in
    --timeout) TIMEOUT="${2:?--timeout needs a value}"; shift 2 ;;
    --share) SHARE="${2:?--share needs a folder}"; shift 2 ;;
    --net) NET="${2:?--net needs udp:LOCALPORT:REMOTEPORT, listen:PORT or connect:PORT}"; shift 2 ;;
    --pidfile) PIDFILE="${2:?--pidfile needs a file}"; shift 2 ;;
    --) shift; break ;;
    -h | --help) usage ;;
    -*) echo "unknown option $1" >&2; usage ;;
    *) break ;;
    esac
done
[[ $# -gt 0 ]] || usage
CMD="$*"
[[ "$TIMEOUT" =~ ^[0-9]+$ && "$TIMEOUT" -gt 0 ]] || { echo "bad --timeout $TIMEOUT" >&2; exit 2; }
if [[ -z "$SHARE" ]]; then
    SHARE="$(git rev-parse --show-toplevel 2>/dev/null || pwd)"
fi
SHARE="$(realpath -e "$SHARE")"
[[ -d "$SHARE" && "$SHARE" != / ]] || { echo "bad --share $SHARE" >&2; exit 2; }

NETDEV=dummy0
NIC=(-nic none)
if [[ -n "$NET" ]]; then
    # Only the host's loopback address: the two guests meet on 127.0.0.1:PORT and nowhere else.
    [[ "$NET" =~ ^(listen|connect):[0-9]+$ || "$NET" =~ ^udp:[0-9]+:[0-9]+$ ]] ||
        { echo "bad --net $NET (udp:LOCALPORT:REMOTEPORT, listen:PORT or connect:PORT)" >&2; exit 2; }
    NETDEV=eth0
fi
MEM="${VERBS4J_GUEST_MEM:-4G}"
CPUS="${VERBS4J_GUEST_CPUS:-2}"
GUEST_IP="${VERBS4J_GUEST_IP:-10.0.0.1}"
# Multi-threaded TCG by default (perftest's cycle-counter latencies need it; single-threaded TCG
# makes them "inf"). The test tiers ask for thread=single (softroce/guest-tests.sh): with
# multi-threaded TCG the JVM's patching of compiled code that another vCPU executes (a method made
# not entrant gets a jmp at its entry) crashed test JVMs about one run in four.
ACCEL="${VERBS4J_GUEST_ACCEL:-tcg,thread=multi,tb-size=512}"
CPU="${VERBS4J_GUEST_CPU:-max}"
LOG="${VERBS4J_GUEST_LOG:-$SHARE/target/guest-console.log}"
if [[ -n "$NET" ]]; then
    MAC="${VERBS4J_GUEST_MAC:-$(printf '52:54:00:00:00:%02x' "${GUEST_IP##*.}")}"
    if [[ "$NET" == udp:* ]]; then
        IFS=: read -r _ LPORT RPORT <<<"$NET"
        NIC=(-netdev "socket,id=n0,udp=127.0.0.1:$RPORT,localaddr=127.0.0.1:$LPORT")
    else
        NIC=(-netdev "socket,id=n0,${NET%%:*}=127.0.0.1:${NET#*:}")
    fi
    NIC+=(-device "virtio-net-pci,netdev=n0,mac=$MAC")
fi
START=$SECONDS
say() { echo "[run-in-guest +$((SECONDS - START))s] $*" >&2; }

# Build (or just check) the cached kernel and initramfs; fast when cached.
if [[ ! -s "$CACHE/kernel.kver" || ! -s "$CACHE/initramfs.cpio.gz" ]]; then
    say "guest cache missing: running build-guest.sh"
fi
"$HERE/build-guest.sh" >&2
KVER="$(cat "$CACHE/kernel.kver")"
KERNEL="$CACHE/kernel/boot/vmlinuz-$KVER"
MODULES="$CACHE/kernel/lib/modules/$KVER"

# Kernel arguments for an emulated guest on a possibly busy host (see the header).
# lpj: loops per jiffy of the TSC delay loop = TSC Hz / CONFIG_HZ (the guest's TSC is the host's).
LPJ="${VERBS4J_GUEST_LPJ:-}"
if [[ -z "$LPJ" ]]; then
    hz="$(sed -n 's/^CONFIG_HZ=\([0-9]*\)$/\1/p' "$CACHE/kernel/boot/config-$KVER" 2>/dev/null || true)"
    mhz="$(awk -F: '/^cpu MHz/ { print $2 + 0; exit }' /proc/cpuinfo 2>/dev/null || true)"
    if [[ "$hz" =~ ^[0-9]+$ && "$mhz" =~ ^[0-9]+(\.[0-9]+)?$ ]]; then
        LPJ="$(awk -v m="$mhz" -v h="$hz" 'BEGIN { printf "%d", m * 1000000 / h }')"
    fi
fi
[[ "$LPJ" =~ ^[1-9][0-9]*$ ]] || LPJ=""
KARGS="console=ttyS0 quiet panic=-1 no_timer_check${LPJ:+ lpj=$LPJ}${VERBS4J_GUEST_KERNEL_ARGS:+ $VERBS4J_GUEST_KERNEL_ARGS}"

# Per-run control folder, shared read-write as 9p tag "ctl".
CTL="$(mktemp -d "${TMPDIR:-/tmp}/verbs4j-guest.XXXXXX")"
QPID=""
TEEPID=""
# shellcheck disable=SC2317  # (called from the EXIT trap)
cleanup() {
    [[ -n "$QPID" ]] && kill -TERM "$QPID" 2>/dev/null
    [[ -n "$TEEPID" ]] && wait "$TEEPID" 2>/dev/null
    rm -rf "$CTL"
}
trap cleanup EXIT
trap 'say "interrupted: stopping the guest"; exit 130' INT TERM HUP
install -m 0755 "$HERE/guest-stage2.sh" "$CTL/stage2.sh"
{
    printf 'SHARE=%q\n' "$SHARE"
    printf 'GUEST_IP=%q\n' "$GUEST_IP"
    printf 'NETDEV=%q\n' "$NETDEV"
    printf 'KVER=%q\n' "$KVER"
} >"$CTL/env"
printf '%s\n' "$CMD" >"$CTL/cmd"
mkdir -p "$(dirname "$LOG")"
# The console goes through a FIFO to tee: to our stdout and to the log file.
mkfifo "$CTL/console.fifo"

q() { printf '%s' "${1//,/,,}"; }   # qemu option values escape "," as ",,"
MONITOR=(-monitor none)
[[ -z "${VERBS4J_GUEST_MONITOR:-}" ]] || MONITOR=(-monitor "unix:$(q "$VERBS4J_GUEST_MONITOR"),server=on,wait=off")
# shellcheck disable=SC2206  # VERBS4J_GUEST_QEMU_ARGS is split at spaces on purpose
QEMU=(
    qemu-system-x86_64
    -accel "$ACCEL" -cpu "$CPU" -machine q35 -m "$MEM" -smp "$CPUS" "${MONITOR[@]}" ${VERBS4J_GUEST_QEMU_ARGS:-}
    -display none -no-reboot "${NIC[@]}"
    -chardev "stdio,id=con0,signal=off" -serial chardev:con0
    -kernel "$KERNEL" -initrd "$CACHE/initramfs.cpio.gz"
    # The host's root, read-only: the guest's userland.
    -virtfs "local,path=/,mount_tag=root,security_model=none,readonly=on,multidevs=remap"
    -virtfs "local,path=$(q "$MODULES"),mount_tag=modules,security_model=none,readonly=on"
    -virtfs "local,path=$(q "$CTL"),mount_tag=ctl,security_model=none"
    -virtfs "local,path=$(q "$SHARE"),mount_tag=share,security_model=none,multidevs=remap"
)
if [[ -n "$PIDFILE" ]]; then QEMU+=(-pidfile "$PIDFILE"); fi

DEADLINE=$((START + TIMEOUT))
QRC=0
START_BOUND="${VERBS4J_GUEST_START_BOUND:-300}"
[[ "$START_BOUND" =~ ^[1-9][0-9]*$ ]] || { echo "bad VERBS4J_GUEST_START_BOUND $START_BOUND" >&2; exit 2; }
boot() { # KERNEL-ARGS: one boot of the guest, bounded by what is left of --timeout; qemu's status in QRC
    tee "$LOG" <"$CTL/console.fifo" &
    TEEPID=$!
    timeout --kill-after=15 "$((DEADLINE - SECONDS > 0 ? DEADLINE - SECONDS : 1))" "${QEMU[@]}" -append "$1" </dev/null >"$CTL/console.fifo" 2>&1 &
    QPID=$!
    # the start watchdog: stops a boot that has not started the command within START_BOUND
    (
        end=$((SECONDS + START_BOUND))
        while ((SECONDS < end)); do
            [[ -e "$CTL/started" || -e "$CTL/status" ]] && exit 0
            kill -0 "$QPID" 2>/dev/null || exit 0
            sleep 1
        done
        [[ -e "$CTL/started" || -e "$CTL/status" ]] && exit 0
        : >"$CTL/stalled"
        kill -TERM "$QPID" 2>/dev/null || true
    ) &
    local watchdog=$!
    QRC=0
    wait "$QPID" || QRC=$?
    QPID=""
    kill "$watchdog" 2>/dev/null || true
    wait "$watchdog" 2>/dev/null || true
    wait "$TEEPID" || true
    TEEPID=""
}
stalled() { # the reason a boot ended before its command, when the start watchdog stopped it
    [[ -e "$CTL/stalled" ]] && echo "no command start within ${START_BOUND}s (VERBS4J_GUEST_START_BOUND): stopped"
}

say "booting the guest (timeout ${TIMEOUT}s, $CPUS CPUs, $MEM; $GUEST_IP on $NETDEV${NET:+ (socket $NET)}; share $SHARE; log $LOG)"
boot "$KARGS${VERBS4J_GUEST_FIRST_BOOT_ARGS:+ $VERBS4J_GUEST_FIRST_BOOT_ARGS}"
# A guest that ended on its own (qemu neither timed out nor killed) before its command started is
# booted once more, if at least a minute of the bound is left.
if [[ ! -e "$CTL/status" && ! -e "$CTL/started" && ($QRC != 124 && $QRC != 137 || -e "$CTL/stalled") ]] &&
    ((DEADLINE - SECONDS >= 60)); then
    why="$(stalled || grep -a -m1 -o -E 'Kernel panic - not syncing: .*|\[verbs4j-guest[^]]*\] FATAL: .*' "$LOG" | tr -d '\r' || true)"
    say "guest died before the command started (${why:-no panic or FATAL line on its console}; qemu exit status $QRC, after $((SECONDS - START))s); retrying once"
    mv -f "$LOG" "$LOG.first-boot"
    rm -f "$CTL/dmesg" "$CTL/stalled"
    say "booting the guest again (${TIMEOUT}s bound, $((DEADLINE - SECONDS))s left; first boot's console: $LOG.first-boot)"
    boot "$KARGS"
fi
qrc=$QRC

if [[ -s "$CTL/dmesg" ]]; then
    { echo "===== guest dmesg ====="; cat "$CTL/dmesg"; } >>"$LOG"
fi
if [[ -s "$CTL/status" ]]; then
    rc="$(cat "$CTL/status")"
    say "guest done in $((SECONDS - START))s: command exit status $rc"
    exit "$rc"
elif [[ -e "$CTL/stalled" ]]; then
    say "FAILED: the guest did not start the command within ${START_BOUND}s of its boot (qemu status $qrc; console log: $LOG)"
    exit 125
elif [[ $qrc == 124 || ($qrc == 137 && $SECONDS -ge $DEADLINE) ]]; then
    say "TIMEOUT: the guest ran past ${TIMEOUT}s and was killed (console log: $LOG)"
    exit 124
elif [[ $qrc == 137 ]]; then
    say "KILLED: qemu was killed (SIGKILL) before the guest reported a status (console log: $LOG)"
    exit 125
else
    say "FAILED: the guest ended without an exit status (qemu status $qrc; console log: $LOG)"
    exit 125
fi
