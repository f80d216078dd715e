#!/bin/bash
# guest-stage2.sh — PID 1 of the verbs4j Soft-RoCE guest after switch_root.
#
# run-in-guest.sh copies this file into the per-run control folder (9p tag
# "ctl", mounted at /run/verbs4j/ctl by the initramfs) together with:
#   env    shell assignments: SHARE (absolute host path, shared read-write),
#          GUEST_IP, KVER, NETDEV (dummy0, or eth0 with run-in-guest.sh --net)
#   cmd    the user's command, run with `bash -c`
# and reads back:
#   started created just before the command starts: a guest that ends without
#          it died before its command (run-in-guest.sh boots it once more)
#   status the command's exit status (written only once it is known; a missing
#          file means failure)
#   dmesg  the guest kernel log, appended to the console log on the host
#
# The root is an overlay: the host's root (read-only 9p) under a tmpfs, so the
# guest runs the host's own binaries and every path is writable (in guest RAM).
# No `set -e`: PID 1 must never exit (that panics the kernel); every failure
# goes through fail(), which powers off without a status file.
set -u

CTL=/run/verbs4j/ctl
# shellcheck source=/dev/null
. "$CTL/env"
P9=trans=virtio,version=9p2000.L,msize=512000

log() { echo "[verbs4j-guest $(cut -d' ' -f1 /proc/uptime 2>/dev/null)s] $*"; }
power_off() {
    dmesg >"$CTL/dmesg" 2>/dev/null
    sync
    echo o >/proc/sysrq-trigger
    sleep 600
}
fail() { log "FATAL: $*"; power_off; }

export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

# --- the usual kernel filesystems ------------------------------------------
mount -t proc proc /proc || fail "mount /proc"
mount -t sysfs sysfs /sys || fail "mount /sys"
mount -t devtmpfs devtmpfs /dev || fail "mount /dev"
mkdir -p /dev/pts /dev/shm
# What udev would make: /dev/fd (bash's process substitution), /dev/stdin, /dev/stdout, /dev/stderr.
ln -sfn /proc/self/fd /dev/fd
for i in 0:stdin 1:stdout 2:stderr; do ln -sfn "/proc/self/fd/${i%%:*}" "/dev/${i#*:}"; done
mount -t devpts devpts /dev/pts
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
exec </dev/null >/dev/console 2>&1
# Plain "\n" on the serial line, so the host sees the command's output unchanged.
stty -F /dev/console -onlcr 2>/dev/null
# Fresh, empty scratch folders (the overlay would otherwise show the host's).
for d in /tmp /var/tmp; do mount -t tmpfs -o mode=1777 tmpfs "$d"; done
mount -t tmpfs -o mode=0755 tmpfs /run/lock 2>/dev/null

# --- kernel modules: the cache's module tree at the usual place ------------
mkdir -p "/lib/modules/$KVER" || fail "mkdir /lib/modules/$KVER"
mount -t 9p -o "$P9,ro,cache=loose" modules "/lib/modules/$KVER" || fail "mount the modules share"

# --- the shared project folder, read-write, at the host's absolute path ----
mkdir -p "$SHARE" || fail "mkdir $SHARE"
mount -t 9p -o "$P9" share "$SHARE" || fail "mount the project share at $SHARE"

hostname verbs4j-guest
echo "127.0.1.1 verbs4j-guest" >>/etc/hosts

# --- Soft-RoCE: rxe0 on dummy0 (one host) or eth0 (two hosts, --net) --------
NETDEV="${NETDEV:-dummy0}"
ulimit -l unlimited                       # else ibv_reg_mr can fail
ip link set lo up
modprobe rdma_rxe || fail "modprobe rdma_rxe"
modprobe rdma_ucm || fail "modprobe rdma_ucm"   # for librdmacm / rping / -R
if [[ $NETDEV == dummy0 ]]; then
    modprobe dummy || fail "modprobe dummy"
    # Debian's modprobe.d sets numdummies=0, so create dummy0 ourselves.
    [[ -e /sys/class/net/dummy0 ]] || ip link add dummy0 type dummy || fail "create dummy0"
else
    # The virtio NIC on the qemu socket network to the other guest (no udev: load it ourselves).
    modprobe virtio_net || fail "modprobe virtio_net"
    for _ in $(seq 1 60); do [[ -e /sys/class/net/$NETDEV ]] && break; sleep 0.5; done
    [[ -e /sys/class/net/$NETDEV ]] || { ip link; fail "no $NETDEV within 30 s"; }
fi
ip addr add "$GUEST_IP/24" dev "$NETDEV" || fail "address $NETDEV"
ip link set "$NETDEV" up || fail "$NETDEV up"
rdma link add rxe0 type rxe netdev "$NETDEV" || fail "rdma link add rxe0"
# Wait (bounded) for the port to be ACTIVE and the RoCE v2 IPv4 GID (index 1).
gid1=/sys/class/infiniband/rxe0/ports/1/gids/1
ok=0
for _ in $(seq 1 120); do
    if rdma link show rxe0/1 2>/dev/null | grep -q 'state ACTIVE' &&
        [[ -r $gid1 && "$(cat $gid1)" != "0000:0000:0000:0000:0000:0000:0000:0000" ]]; then
        ok=1
        break
    fi
    sleep 0.5
done
[[ $ok == 1 ]] || { rdma link show; fail "rxe0 did not become ACTIVE within 60 s"; }
log "rxe0 ACTIVE on $NETDEV $GUEST_IP (GID 1 $(cat $gid1))"

# --- the job ----------------------------------------------------------------
export JAVA_HOME=/usr/lib/jvm/temurin-25-jdk-amd64
export PATH="$JAVA_HOME/bin:$PATH"
export HOME=/root LANG=C.UTF-8 TERM=dumb
export VERBS4J_GUEST=1 VERBS4J_GUEST_IP="$GUEST_IP"
cd "$SHARE" || fail "cd $SHARE"
: >"$CTL/started" || fail "cannot write $CTL/started"
log "running the command in $SHARE"
bash -c "$(cat "$CTL/cmd")"
rc=$?
cd /
log "command exited with status $rc"
echo "$rc" >"$CTL/status.tmp" && mv "$CTL/status.tmp" "$CTL/status"
umount "$SHARE" 2>/dev/null
power_off
