#!/bin/busybox sh
# shellcheck shell=dash disable=SC2013,SC2093
# /init of the verbs4j Soft-RoCE guest's initramfs (packed by build-guest.sh).
#
# Runs under the Debian kernel in qemu. It only has static busybox and the few
# modules needed to reach the 9p shares. It:
#   1. loads virtio + 9p + overlay modules in modules.dep order (/etc/modules.list),
#   2. mounts the host's root filesystem (9p tag "root", read-only) as the lower
#      layer of an overlay whose upper layer is a tmpfs: the guest sees the host's
#      userland unchanged, and every path is writable, writes going to guest RAM,
#   3. mounts the per-run control folder (9p tag "ctl", read-write) at
#      /run/verbs4j/ctl and switch_roots into its stage2.sh (written by
#      run-in-guest.sh), which does the rest with the host's full userland.
# Any failure powers the guest off without writing a status file, which the host
# side reports as a failure.

/bin/busybox mkdir -p /bin /proc /sys /dev /lower /rw /newroot
/bin/busybox --install -s /bin
export PATH=/bin

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
# The kernel found no /dev/console in the archive; take the serial console now.
exec </dev/console >/dev/console 2>&1

say() { echo "[verbs4j-guest init] $*"; }
die() {
    say "FATAL: $*"
    sync
    echo o > /proc/sysrq-trigger
    sleep 60
}

for m in $(cat /etc/modules.list); do
    insmod "/lib/modules/$m" || die "insmod $m failed"
done

P9=trans=virtio,version=9p2000.L,msize=512000
# The host root is read-only and does not change under a run: let 9p cache it.
mount -t 9p -o "$P9,ro,cache=loose" root /lower || die "cannot mount the 9p root"
mount -t tmpfs -o mode=0755 tmpfs /rw || die "cannot mount tmpfs"
mkdir -p /rw/upper /rw/work
mount -t overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work overlay /newroot \
    || die "cannot mount the overlay root"
mkdir -p /newroot/run/verbs4j/ctl
mount -t 9p -o "$P9" ctl /newroot/run/verbs4j/ctl || die "cannot mount the ctl share"
[ -f /newroot/run/verbs4j/ctl/stage2.sh ] || die "no stage2.sh in the ctl share"

umount /proc /sys /dev 2>/dev/null
exec switch_root /newroot /bin/bash /run/verbs4j/ctl/stage2.sh
die "switch_root failed"
