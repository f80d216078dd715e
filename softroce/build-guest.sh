#!/usr/bin/env bash
# build-guest.sh — prepare the Soft-RoCE (rdma_rxe) qemu guest used by verbs4j's
# integration tests. Idempotent: a second run with a complete cache takes well
# under a second.
#
# Usage: softroce/build-guest.sh [--force]
#   --force   throw the cache away and build everything again
#
# Why: the development/CI machines' own kernel has no InfiniBand and cannot load
# modules, so rdma_rxe cannot run on the host. Debian 12's stock kernel has it;
# we boot that kernel under qemu (TCG) and give it the HOST's root filesystem,
# shared read-only over 9p, as its userland (libibverbs, the rxe provider,
# perftest, rping, iproute2's rdma, the JDK: all the host's own binaries).
#
# Everything lands in the cache, never in the source tree and never installed
# on the host:
#   ${VERBS4J_GUEST_CACHE:-$HOME/.cache/verbs4j-guest[-SERIES]}/
#     kernel/            the kernel .deb unpacked (boot/vmlinuz-KVER, lib/modules/KVER + modules.dep)
#     kernel.kver        KVER; written last, marks the kernel step complete
#     initramfs.cpio.gz  static busybox + virtio/9p/overlay modules + initramfs-init.sh as /init
#     initramfs.stamp    hash of what the initramfs was built from
#
# Host packages: missing ones are installed with apt-get (needs root), because
# CI runs this on a fresh machine. Set VERBS4J_GUEST_KERNEL_PKG to pin a kernel
# package (default: whatever linux-image-amd64 depends on). VERBS4J_GUEST_KERNEL=
# SERIES (e.g. 6.12) takes the newest linux-image-SERIES.*-amd64 instead (what the
# meta-package linux-image-SERIES-amd64 depends on), in a cache of its own
# (default $HOME/.cache/verbs4j-guest-SERIES), so the default guest's stays as is.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SERIES="${VERBS4J_GUEST_KERNEL:-}"
[[ -z "$SERIES" || "$SERIES" =~ ^[0-9]+\.[0-9]+$ ]] ||
    { echo "[build-guest] ERROR: bad VERBS4J_GUEST_KERNEL $SERIES (a series such as 6.12)" >&2; exit 2; }
CACHE="${VERBS4J_GUEST_CACHE:-$HOME/.cache/verbs4j-guest${SERIES:+-$SERIES}}"
START=$SECONDS

say() { echo "[build-guest +$((SECONDS - START))s] $*"; }
die() { echo "[build-guest] ERROR: $*" >&2; exit 1; }

if [[ "${1:-}" == "--force" ]]; then
    say "--force: removing $CACHE"
    rm -rf "$CACHE"
elif [[ $# -gt 0 ]]; then
    die "usage: $0 [--force]"
fi

# --------------------------------------------------------------------------
# 1. Host packages.
#    Tools to build and boot the guest, plus the userland the guest borrows
#    from the host root (the guest runs these very binaries).
# --------------------------------------------------------------------------
HOST_PKGS=(
    qemu-system-x86 busybox-static cpio kmod gzip xz-utils   # build + boot
    iproute2 procps libibverbs1 ibverbs-providers ibverbs-utils
    librdmacm1 rdmacm-utils perftest                 # guest userland (host root)
)
APT_UPDATED=0
apt_update_once() {
    if [[ $APT_UPDATED == 0 ]]; then
        say "apt-get update"
        apt-get -o DPkg::Lock::Timeout=600 update -qq
        APT_UPDATED=1
    fi
}
missing=()
for p in "${HOST_PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
    [[ $EUID == 0 ]] || die "missing host packages (${missing[*]}); run as root or install them"
    apt_update_once
    say "installing host packages: ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
        --no-install-recommends "${missing[@]}"
fi
[[ -d /usr/lib/jvm/temurin-25-jdk-amd64 ]] ||
    echo "[build-guest] WARNING: /usr/lib/jvm/temurin-25-jdk-amd64 missing: no Java 25 in the guest" >&2

mkdir -p "$CACHE"

# --------------------------------------------------------------------------
# 2. The Debian kernel, unpacked into the cache (never installed on the host).
# --------------------------------------------------------------------------
if [[ -s "$CACHE/kernel.kver" && -f "$CACHE/kernel/boot/vmlinuz-$(cat "$CACHE/kernel.kver")" ]]; then
    KVER="$(cat "$CACHE/kernel.kver")"
    say "kernel $KVER: cached"
else
    KPKG="${VERBS4J_GUEST_KERNEL_PKG:-}"
    if [[ -z "$KPKG" ]]; then
        META="linux-image-${SERIES:+$SERIES-}amd64"
        resolve() { apt-cache depends "$META" 2>/dev/null |
            awk '$1 == "Depends:" && $2 ~ /^linux-image-/ { print $2; exit }'; }
        KPKG="$(resolve || true)"
        if [[ -z "$KPKG" ]]; then apt_update_once; KPKG="$(resolve || true)"; fi
        [[ -n "$KPKG" ]] || die "cannot resolve the package that $META depends on"
    fi
    say "downloading $KPKG (about 70 MB)"
    rm -rf "$CACHE/dl" "$CACHE/kernel.new" "$CACHE/kernel"
    mkdir -p "$CACHE/dl"
    # Sandbox user root: the cache may be unreadable to _apt (e.g. under /root).
    (cd "$CACHE/dl" && apt-get -q -o APT::Sandbox::User=root download "$KPKG")
    deb=("$CACHE"/dl/*.deb)
    [[ -f "${deb[0]}" ]] || die "apt-get download produced no .deb"
    say "unpacking ${deb[0]##*/}"
    dpkg-deb -x "${deb[0]}" "$CACHE/kernel.new"
    KVER="$(ls "$CACHE/kernel.new/lib/modules")"
    [[ -n "$KVER" && $(wc -w <<<"$KVER") == 1 ]] || die "expected one module tree, got: $KVER"
    [[ -f "$CACHE/kernel.new/boot/vmlinuz-$KVER" ]] || die "no vmlinuz-$KVER in the package"
    say "depmod $KVER (the .deb ships no modules.dep)"
    depmod -b "$CACHE/kernel.new" "$KVER"
    mv "$CACHE/kernel.new" "$CACHE/kernel"
    rm -rf "$CACHE/dl"
    echo "$KVER" >"$CACHE/kernel.kver"
    rm -f "$CACHE/initramfs.stamp"   # new kernel: new initramfs
fi
KROOT="$CACHE/kernel"
for m in rdma_rxe rdma_ucm dummy; do
    modprobe -d "$KROOT" -S "$KVER" --show-depends "$m" >/dev/null ||
        die "module $m not in kernel $KVER"
done

# --------------------------------------------------------------------------
# 3. The initramfs: static busybox, the modules needed to mount the 9p/overlay
#    root in modules.dep order, and /init = initramfs-init.sh.
# --------------------------------------------------------------------------
INIT_MODS=(virtio_pci 9pnet_virtio 9p overlay)
# modprobe --show-depends prints "insmod PATH" lines, dependencies first.
mapfile -t MOD_PATHS < <(for m in "${INIT_MODS[@]}"; do
    modprobe -d "$KROOT" -S "$KVER" --show-depends "$m"; done |
    awk '$1 == "insmod" && !seen[$2]++ { print $2 }')
BUSYBOX="$(command -v busybox)"
stamp="$( { echo "$KVER"; printf '%s\n' "${MOD_PATHS[@]}"; cat "$HERE/initramfs-init.sh";
    sha256sum "$BUSYBOX"; } | sha256sum | cut -d' ' -f1)"
if [[ -f "$CACHE/initramfs.cpio.gz" && "$(cat "$CACHE/initramfs.stamp" 2>/dev/null)" == "$stamp" ]]; then
    say "initramfs: cached"
else
    say "building the initramfs (${#MOD_PATHS[@]} modules)"
    file "$BUSYBOX" 2>/dev/null | grep -q 'dynamically linked' &&
        die "$BUSYBOX is dynamically linked; install busybox-static"
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' EXIT
    mkdir -p "$tmp/bin" "$tmp/etc" "$tmp/lib/modules"
    cp "$BUSYBOX" "$tmp/bin/busybox"
    : >"$tmp/etc/modules.list"
    for p in "${MOD_PATHS[@]}"; do
        # Newer kernels ship compressed modules (6.12: .ko.xz); busybox insmod takes plain ones.
        m="${p##*/}"
        case "$m" in
        *.ko.xz) xz -dc "$p" >"$tmp/lib/modules/${m%.xz}"; m="${m%.xz}" ;;
        *) cp "$p" "$tmp/lib/modules/" ;;
        esac
        echo "$m" >>"$tmp/etc/modules.list"
    done
    install -m 0755 "$HERE/initramfs-init.sh" "$tmp/init"
    (cd "$tmp" && find . -print0 | cpio --null -o -H newc --quiet) | gzip -9 >"$CACHE/initramfs.cpio.gz.new"
    mv "$CACHE/initramfs.cpio.gz.new" "$CACHE/initramfs.cpio.gz"
    echo "$stamp" >"$CACHE/initramfs.stamp"
    rm -rf "$tmp"
    trap - EXIT
fi

say "ready: kernel $KVER, initramfs $(du -h "$CACHE/initramfs.cpio.gz" | cut -f1) in $CACHE"
