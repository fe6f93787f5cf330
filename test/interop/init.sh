#!/bin/busybox sh
# SPDX-License-Identifier: Apache-2.0
# /init of the interop initramfs (test/interop/prepare.sh puts it there). Loads the modules, brings
# up eth0 as 10.0.2.15/24 (QEMU user networking: the host is 10.0.2.2), runs the guest script and
# prints "NKV-INTEROP-EXIT <rc>" on the console, then powers off.
# The script: nkv_script=PATH on the kernel command line (init gets it as an environment variable),
# else /interop/guest.sh (run.sh appends a second cpio archive carrying it and /interop/env).
/bin/busybox --install -s /bin
export PATH=/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t tmpfs tmpfs /tmp
exec </dev/console >/dev/console 2>&1
echo "nkv-interop: init ($(uname -r))"
for m in $(cat /lib/modules/load.list); do
  insmod "/lib/modules/$m" || echo "nkv-interop: insmod $m failed"
done
ip link set lo up
i=0
while [ ! -e /sys/class/net/eth0 ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
ip addr add 10.0.2.15/24 dev eth0
ip link set eth0 up
ip route add default via 10.0.2.2 2>/dev/null
script=${nkv_script:-/interop/guest.sh}
if [ -f "$script" ]; then
  sh "$script"
  rc=$?
else
  echo "nkv-interop: no guest script at $script"
  rc=2
fi
echo "NKV-INTEROP-EXIT $rc"
sync
poweroff -f
