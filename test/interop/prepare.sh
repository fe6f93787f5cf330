#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# One-time, cached preparation for the Linux kernel interop test (test/interop/run.sh) and the fault
# suite's netem router VM (test/faults/netem.sh):
#   - Debian packages: qemu-system-x86, busybox-static, nvme-cli, iproute2, ethtool, kmod, xz-utils,
#     zstd, cpio
#   - the Debian kernel (linux-image-amd64 -> linux-image-<abi>-amd64), downloaded and unpacked with
#     dpkg -x (never installed), its vmlinux extracted from vmlinuz for QEMU's PVH entry.
#     NKV_INTEROP_KERNEL_PKG names another meta package: linux-image-6.12-amd64 (Debian 12's 6.12,
#     built with CONFIG_NVME_HOST_AUTH; 6.1 has no NVMe in-band authentication) for run.sh auth
#   - an initramfs: busybox, nvme-cli, iproute2's tc (busybox's tc has no netem) and ethtool with
#     their libraries and loader, the nvme-tcp / virtio_net / crc32c / sch_netem module closures (from
#     modules.dep, made by depmod -b), /etc/nvme/hostnqn + hostid, /init
#
# Cache: ${NKV_INTEROP_CACHE:-/var/cache/nkv-interop}/<kernel package version>/ holds vmlinux,
# initramfs.cpio.gz and a stamp. Outside the repository, so it survives between the CI steps of a
# run (and across runs on one machine); a second call finds the stamp and only checks it (< 1 s).
# The stamp also records a hash of this script and of init.sh, so editing them rebuilds.
# Prints "NKV_INTEROP_DIR=<dir>" as its last line. Run as root (or with sudo available).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
CACHE="${NKV_INTEROP_CACHE:-/var/cache/nkv-interop}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
log() { echo "interop-prepare: $*" >&2; }
t0=$(date +%s)

# 1. Host packages (only what is missing; apt-get update at most once).
PKGS=(qemu-system-x86 busybox-static nvme-cli iproute2 ethtool kmod xz-utils zstd cpio)
bash "$HERE/../../scripts/apt-install.sh" interop-prepare "${PKGS[@]}" >&2

# 2. Which kernel: the package linux-image-amd64 (or $NKV_INTEROP_KERNEL_PKG) depends on (e.g.
# linux-image-6.1.0-57-amd64).
KMETA="${NKV_INTEROP_KERNEL_PKG:-linux-image-amd64}"
kpkg() { apt-cache depends "$KMETA" 2>/dev/null | sed -n 's/^ *Depends: \(linux-image-[0-9].*\)$/\1/p' | head -1; }
KPKG="$(kpkg)"
if [ -z "$KPKG" ]; then $SUDO apt-get update -q >/dev/null; KPKG="$(kpkg)"; fi
[ -n "$KPKG" ] || { log "cannot resolve $KMETA (apt-get update?)"; exit 1; }
KVER_PKG="$(apt-cache policy "$KPKG" | sed -n 's/^ *Candidate: //p')"
KREL="${KPKG#linux-image-}"                        # 6.1.0-57-amd64 (the modules directory)
KEY="$(printf '%s\n' "$KPKG" "$KVER_PKG" | cat - "$0" "$HERE/init.sh" | sha256sum | cut -c1-12)"
DIR="$CACHE/${KPKG}_${KVER_PKG}"
STAMP="$DIR/stamp"
$SUDO mkdir -p "$CACHE"
[ -w "$CACHE" ] || $SUDO chown "$(id -u):$(id -g)" "$CACHE"
exec 9>"$CACHE/.lock"
flock 9   # one builder at a time (two tests may call this at once)
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$KEY" ] && [ -s "$DIR/vmlinux" ] && [ -s "$DIR/initramfs.cpio.gz" ]; then
  log "cached: $DIR ($KPKG $KVER_PKG)"
  echo "NKV_INTEROP_DIR=$DIR"
  exit 0
fi
log "building $DIR ($KPKG $KVER_PKG)"
$SUDO mkdir -p "$DIR"
[ -w "$DIR" ] || $SUDO chown "$(id -u):$(id -g)" "$DIR"
rm -f "$STAMP"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/nkv-interop-prep.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

# 3. Kernel package: download and unpack (not installed).
( cd "$WORK" && apt-get download "$KPKG=$KVER_PKG" >/dev/null 2>&1 || apt-get download "$KPKG" >/dev/null )
dpkg -x "$WORK"/"$KPKG"_*.deb "$WORK/k"
MODDIR="$WORK/k/lib/modules/$KREL"
[ -d "$MODDIR" ] || { log "no modules for $KREL in $KPKG"; exit 1; }
depmod -b "$WORK/k" "$KREL"                         # the package ships no modules.dep

# 4. vmlinux from vmlinuz, as the kernel's scripts/extract-vmlinux does (Debian: XZ payload).
VMLINUZ="$WORK/k/boot/vmlinuz-$KREL"
extract() { # magic-as-grep-P, decompressor
  local off
  for off in $(LC_ALL=C grep -aboP "$1" "$VMLINUZ" | cut -d: -f1); do
    tail -c +$((off + 1)) "$VMLINUZ" | $2 >"$WORK/vmlinux" 2>/dev/null || true
    if [ "$(head -c 4 "$WORK/vmlinux" | od -An -tx1 | tr -d ' ')" = 7f454c46 ]; then return 0; fi
  done
  return 1
}
extract '\xfd7zXZ\x00' 'xz -dc' || extract '\x1f\x8b\x08' 'gzip -dc' || extract '\x28\xb5\x2f\xfd' 'zstd -dc' ||
  { log "could not extract vmlinux from $VMLINUZ"; exit 1; }
grep -q '^CONFIG_PVH=y' "$WORK/k/boot/config-$KREL" || log "warning: CONFIG_PVH is not set; use vmlinuz"
cp "$VMLINUZ" "$DIR/vmlinuz.new"

# 5. initramfs tree.
R="$WORK/root"
mkdir -p "$R"/{bin,sbin,etc/nvme,proc,sys,dev,tmp,run,lib/modules,interop}
cp /bin/busybox "$R/bin/busybox"
# /dev/console must exist before /init runs or init has no stdout.
mknod -m 600 "$R/dev/console" c 5 1 2>/dev/null || true
mknod -m 666 "$R/dev/null" c 1 3 2>/dev/null || true
# A host binary + every library ldd lists + the loader, at their own paths: nvme-cli; iproute2's tc
# at /usr/sbin/tc (busybox's own tc applet, linked into /sbin, knows no netem) and ethtool, for the
# fault suite's router VM (netem on its NICs, GRO off so that netem sees every packet).
add_bin() { # host path, guest path
  mkdir -p "$R$(dirname "$2")"
  cp "$1" "$R$2"
  for lib in $(ldd "$1" | grep -oE '/[^ ]+'); do
    mkdir -p "$R$(dirname "$lib")"
    cp -L "$lib" "$R$lib"
  done
}
add_bin /usr/sbin/nvme /sbin/nvme
add_bin /usr/sbin/tc /usr/sbin/tc
add_bin /usr/sbin/ethtool /usr/sbin/ethtool
[ -e "$R/lib64/ld-linux-x86-64.so.2" ] || { mkdir -p "$R/lib64"; cp -L /lib64/ld-linux-x86-64.so.2 "$R/lib64/"; }
# Host identity (nvme-cli needs both files).
uuid="$(cat /proc/sys/kernel/random/uuid)"
echo "nqn.2014-08.org.nvmexpress:uuid:$uuid" >"$R/etc/nvme/hostnqn"
echo "$uuid" >"$R/etc/nvme/hostid"
# Modules: the closure of each wanted module from modules.dep, dependencies first, flattened into
# /lib/modules with a load order for insmod. Modules built into the kernel (modules.builtin) are
# skipped; compressed ones (6.12 ships .ko.xz) are stored decompressed, for busybox insmod. 6.12's
# nvme-tcp brings nvme-auth and nvme-keyring along; its HMAC, SHA-2 and FFDHE code is built in.
# sch_netem is for the fault suite's router VM (loaded at boot like the rest: a few KB, no effect
# until a qdisc uses it).
: >"$R/lib/modules/load.list"
want=(kernel/crypto/crct10dif_generic kernel/crypto/crc64_rocksoft_generic
      kernel/crypto/crc32c_generic
      kernel/drivers/virtio/virtio_pci kernel/drivers/net/virtio_net
      kernel/drivers/nvme/host/nvme-tcp kernel/net/sched/sch_netem)
add_mod() {
  local m="$1" base
  base="$(basename "$m")"
  base="${base%.xz}"; base="${base%.zst}"
  grep -qx "$base" "$R/lib/modules/load.list" && return 0
  [ -f "$MODDIR/$m" ] || { log "missing module $m"; exit 1; }
  case "$m" in
    *.xz) xz -dc "$MODDIR/$m" >"$R/lib/modules/$base" ;;
    *.zst) zstd -qdc "$MODDIR/$m" >"$R/lib/modules/$base" ;;
    *) cp "$MODDIR/$m" "$R/lib/modules/$base" ;;
  esac
  echo "$base" >>"$R/lib/modules/load.list"
}
for m in "${want[@]}"; do
  grep -qx "$m.ko" "$MODDIR/modules.builtin" 2>/dev/null && continue
  line="$(grep -E "^$m\.ko(\.xz|\.zst)?:" "$MODDIR/modules.dep" || true)"
  [ -n "$line" ] || { log "$m not in modules.dep"; exit 1; }
  m="${line%%:*}"
  read -r -a deps <<<"${line#*:}"
  # modules.dep lists a module's dependencies with the deepest last: load them in reverse.
  for ((i = ${#deps[@]} - 1; i >= 0; i--)); do add_mod "${deps[i]}"; done
  add_mod "$m"
done
cp "$HERE/init.sh" "$R/init"
chmod 755 "$R/init"
( cd "$R" && find . -print0 | sort -z | cpio --null -o -H newc --quiet ) | gzip -1 >"$DIR/initramfs.cpio.gz.new"
mv "$WORK/vmlinux" "$DIR/vmlinux"
mv "$DIR/vmlinuz.new" "$DIR/vmlinuz"
mv "$DIR/initramfs.cpio.gz.new" "$DIR/initramfs.cpio.gz"
cp "$R/etc/nvme/hostnqn" "$DIR/hostnqn"
cp "$R/lib/modules/load.list" "$DIR/modules.list"
echo "$KEY" >"$STAMP"
SERIES="$(echo "$KREL" | cut -d. -f1-2)"     # 6.1, 6.12: each series keeps its own cache
for old in "$CACHE"/linux-image-"$SERIES".*; do  # earlier builds of this series
  [ "$old" = "$DIR" ] || rm -rf "$old"
done
log "done in $(( $(date +%s) - t0 )) s: vmlinux $(du -h "$DIR/vmlinux" | cut -f1), initramfs $(du -h "$DIR/initramfs.cpio.gz" | cut -f1)"
echo "NKV_INTEROP_DIR=$DIR"
