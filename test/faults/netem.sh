#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# netem.sh - the fault suite's network scenario: netem delay 100 ms and loss 5 % between the rados-nkv
# daemon and the cluster, under load, for 10 s (--long: 120 s). The daemon runs in a network namespace
# with a micro cluster of its own (memstore); the suite's hosts stay outside and reach the daemon
# through a veth pair (198.18.N.1 <-> 198.18.N.2), so only the daemon's cluster traffic is impaired,
# never the hosts' and nothing outside the test. fault_suite netem applies the impairment, removes it,
# and checks the suite's invariant.
#   bash test/faults/netem.sh PATH/fault_suite PATH/rados-nkv [--long]
#
# Two ways to impair, said in the output:
#  - "netem in the host kernel": the kernel has sch_netem. Daemon and cluster share the namespace;
#    `tc qdisc add dev lo root netem delay 100ms loss 5%` on its loopback delays and drops every packet
#    between them (each crosses lo once per direction).
#  - "netem in router VM (kernel X, KVM|TCG)": the kernel has no netem (e.g. a VM's kernel built
#    without modules). A QEMU guest running a Debian kernel, which ships sch_netem, routes between
#    two namespaces: the cluster in namespace C (198.19.N.2, ceph-dev.sh start --addr), the daemon in
#    namespace D (198.19.N.6, plus the veth to the hosts). Each namespace holds one tap of the guest;
#    the guest forwards between its two NICs (198.19.N.1 and .5) and C and D route to each other
#    through it, so every packet between daemon and cluster crosses the guest, and the impairment is a
#    real `tc qdisc replace dev ethX root netem delay 100ms loss 5%` inside the guest on both of its
#    egress interfaces (one per direction: the same 200 ms round trip as on lo). GRO and the NICs'
#    segmentation offloads are off, so netem delays and drops packets as they are on a wire, not
#    64 KiB super-packets. Guest kernel and initramfs (busybox, iproute2's tc, ethtool, virtio_net
#    and sch_netem) come from test/interop/prepare.sh,
#    cached in /var/cache/nkv-interop (a first run downloads the kernel package with apt-get download,
#    about 30 s; later ones boot from the cache); the guest script is test/faults/netem-router.sh. It
#    takes "on", "off", "stats" and "quit" on its second serial port, a QEMU pipe chardev
#    ($T/vm/ctl.in/.out): NKV_FAULTS_IMPAIR_ON/OFF run `netem.sh --router-ctl DIR on|off`, which waits
#    for the guest's answer; "off" answers with the netem qdiscs' counters (packets impaired and
#    dropped each way), printed in the output, and fails unless both qdiscs saw packets and dropped
#    some: an impairment that did not happen fails the test. KVM (-cpu host) where /dev/kvm opens and
#    the CPU shows vmx/svm, falling back to TCG if the KVM guest is not up within 30 s; TCG otherwise.
#    The guest only forwards packets; under TCG on 2 busy cores it carries about half the load's rate
#    over a shared loopback (a quick run acknowledged 1084 Stores, against 2167 with NKV_FAULTS_NETEM=tbf
#    on lo), plenty for the scenario.
#    The guest boots (8-14 s under TCG) while the cluster starts; the whole test takes 47-63 s here
#    with the kernel cached.
#
# Environment:
#   NKV_FAULTS_NETEM=auto|host|vm|tbf  auto (default): the host kernel's netem if it has one, else the
#                        router VM; host: the host kernel's or skip; vm: the router VM even where the
#                        host has netem; tbf: on a kernel without netem, a tbf rate limit on lo instead
#                        (queueing delay and tail drops: not netem, it only checks this test's plumbing)
#   NKV_NETEM_ACCEL=kvm|tcg   the router VM's accelerator (default: KVM when usable, see above)
#   NKV_NETEM_KERNEL_PKG     the guest kernel's meta package (default linux-image-amd64: Debian 12's
#                        6.1; linux-image-6.12-amd64 also works), NKV_INTEROP_CACHE its cache directory
#   NKV_NETEM_BOOT_TIMEOUT   seconds for the router VM to come up (default 60)
#   NKV_REQUIRE_NETEM=1      a skip becomes a failure
# Skips (exit 77, the reason said): not root; no iproute2; no netem in the host kernel and no router VM
# (QEMU, the kernel package or the initramfs cannot be had: apt unreachable); the guest did not even
# reach its init within the boot timeout under TCG (too slow a machine). Everything else that goes
# wrong is a failure.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)

# --router-ctl DIR CMD: send CMD to the router VM of DIR and print its answer; exit 0 on "ok".
# A sequence token ties the answer to this command (the guest's output waits in the pipe until read).
# Both FIFOs are opened read-write: that never blocks, even with QEMU gone (the timeout then says so).
if [ "${1:-}" = --router-ctl ]; then
	dir=$2 cmd=$3 seq=$$-$RANDOM
	{ echo "$cmd $seq" >&3; } 3<>"$dir/ctl.in" || exit 1
	ans=$(timeout 20 sed -n "s/\r//; /^\(ok\|err\) $cmd $seq/{p;q}" 0<>"$dir/ctl.out")
	if [ -z "$ans" ]; then
		echo "router VM: no answer to '$cmd' within 20 s"
		exit 1
	fi
	echo "router VM: $ans"
	case "$ans" in ok*) ;; *) exit 1 ;; esac
	# "off" proves the impairment was real: both netem qdiscs saw packets, and dropped some.
	if [ "$cmd" = off ]; then
		read -r pc dc pd dd <<<"$(echo "$ans" | sed -n 's/.*cluster side ([^)]*): \([0-9]*\) pkt ([0-9]* bytes), \([0-9]*\) dropped; daemon side ([^)]*): \([0-9]*\) pkt ([0-9]* bytes), \([0-9]*\) dropped.*/\1 \2 \3 \4/p')"
		if [ -z "${dd:-}" ] || [ "$pc" = 0 ] || [ "$pd" = 0 ] || [ $((dc + dd)) = 0 ]; then
			echo "router VM: the netem qdiscs did not impair traffic both ways (packets $pc/$pd, dropped $dc/$dd)"
			exit 1
		fi
		awk -v pc="$pc" -v dc="$dc" -v pd="$pd" -v dd="$dd" 'BEGIN { printf "router VM: netem dropped %.1f %% of " \
			"the packets toward the cluster, %.1f %% of those toward the daemon\n", 100 * dc / (pc + dc), 100 * dd / (pd + dd) }'
	fi
	exit 0
fi

SUITE=$1 D=$2
shift 2
skip() {
	if [ "${NKV_REQUIRE_NETEM:-0}" = 1 ]; then echo "FAIL - $* (NKV_REQUIRE_NETEM=1)"; exit 1; fi
	echo "skip: $*"
	exit 77
}
fail() { echo "FAIL - $*"; exit 1; }
t_start=$SECONDS
[ "$(id -u)" = 0 ] || skip "needs root (network namespaces, a veth pair, taps, tc)"
command -v ip >/dev/null && command -v tc >/dev/null || skip "needs iproute2 (ip, tc)"
WANT=${NKV_FAULTS_NETEM:-auto}
case "$WANT" in auto | host | vm | tbf) ;; *) fail "NKV_FAULTS_NETEM=$WANT: auto, host, vm or tbf" ;; esac
NS=nkvf$$                           # the daemon's namespace (and the cluster's, with the host's netem)
NSC=nkvc$$                          # the cluster's namespace (router VM)
TAPC=nkvtc$$ TAPD=nkvtd$$
SUB=$(($$ % 250 + 1))               # 198.18.0.0/15 is for benchmarks (RFC 2544): no real network uses it
HOST_IP=198.18.$SUB.1 NS_IP=198.18.$SUB.2
GW_C=198.19.$SUB.1 C_IP=198.19.$SUB.2 GW_D=198.19.$SUB.5 D_IP=198.19.$SUB.6
MAC_C=52:54:00:19:$(printf %02x "$SUB"):01 MAC_D=52:54:00:19:$(printf %02x "$SUB"):05
T=$(mktemp -d "${TMPDIR:-/tmp}/nkv-netem.XXXXXX")
QEMU_PID=
cleanup() {
	[ -f "$T/ceph/state" ] && bash "$ROOT/scripts/ceph-dev.sh" stop --dir "$T/ceph" >/dev/null 2>&1
	if [ -n "$QEMU_PID" ]; then
		{ echo "quit end" >&3; } 3<>"$T/vm/ctl.in" 2>/dev/null # the guest powers off
		for _ in $(seq 30); do kill -0 "$QEMU_PID" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$QEMU_PID" 2>/dev/null
		wait "$QEMU_PID" 2>/dev/null
	fi
	ip netns del "$NS" 2>/dev/null   # takes its end of the veth pair (and so the pair) and its tap
	ip netns del "$NSC" 2>/dev/null
	ip link del "h$NS" 2>/dev/null
	ip link del "$TAPC" 2>/dev/null  # taps not moved yet (an early failure)
	ip link del "$TAPD" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
in_ns() { ip netns exec "$NS" "$@"; }
in_nsc() { ip netns exec "$NSC" "$@"; }

ip netns add "$NS" || skip "cannot create a network namespace"
in_ns ip link set lo up &&
	ip link add "h$NS" type veth peer name "n$NS" && ip link set "n$NS" netns "$NS" &&
	ip addr add "$HOST_IP/30" dev "h$NS" && ip link set "h$NS" up &&
	in_ns ip addr add "$NS_IP/30" dev "n$NS" && in_ns ip link set "n$NS" up ||
	fail "cannot set up the veth pair $HOST_IP <-> $NS_IP"

# The host kernel's netem, if any.
HOST_NETEM=0
if in_ns tc qdisc add dev lo root netem delay 1ms 2>/dev/null; then
	HOST_NETEM=1
else
	modprobe sch_netem 2>/dev/null && in_ns tc qdisc add dev lo root netem delay 1ms 2>/dev/null && HOST_NETEM=1
fi
in_ns tc qdisc del dev lo root 2>/dev/null
MODE=
case "$WANT" in
auto) [ $HOST_NETEM = 1 ] && MODE=host || MODE=vm ;;
host) [ $HOST_NETEM = 1 ] && MODE=host || skip "NKV_FAULTS_NETEM=host: this kernel ($(uname -r)) has no netem qdisc" ;;
vm) MODE=vm ;;
tbf) [ $HOST_NETEM = 1 ] && MODE=host || MODE=tbf ;;
esac
IMPAIR="netem delay 100ms loss 5%"

# ---- the router VM ----------------------------------------------------------------------------------

# No segmentation offloads on the guest's NICs (and GRO off inside, netem-router.sh): netem sees each
# packet as it is on a wire, so "loss 5%" drops 5 % of the packets. With offloads the host's TCP stack
# hands the tap 64 KiB super-packets and netem drops or delays those whole. Checksum offload stays.
NOSEG=gso=off,guest_tso4=off,guest_tso6=off,guest_ecn=off,guest_ufo=off,host_tso4=off,host_tso6=off,host_ecn=off,host_ufo=off
# Boot the guest with @1 (kvm|tcg) on the taps; set QEMU_PID. The taps must exist in this namespace
# while QEMU attaches to them by name; they move into C and D afterwards. The guest runs the interop
# initramfs with this run's router.sh and env in a second cpio archive. no_timer_check: a TCG guest on
# a busy machine can miss the kernel's IO-APIC timer check and panic at boot ("IO-APIC + timer doesn't
# work", seen here once).
vm_boot() {
	local accel=$1 cpu=()
	[ "$accel" = kvm ] && cpu=(-cpu host)
	rm -f "$T/vm/console.log" "$T/vm/ctl.in" "$T/vm/ctl.out"
	mkfifo "$T/vm/ctl.in" "$T/vm/ctl.out"
	qemu-system-x86_64 -nodefaults -display none -no-reboot -accel "$accel" "${cpu[@]}" -m 256 -smp 1 \
		-kernel "$IDIR/vmlinux" -initrd "$T/vm/initrd.img" \
		-append "console=ttyS0 quiet loglevel=3 panic=-1 no_timer_check nkv_script=/interop/router.sh" \
		-serial "file:$T/vm/console.log" -serial "pipe:$T/vm/ctl" -monitor none \
		-netdev "tap,id=c,ifname=$TAPC,script=no,downscript=no" -device "virtio-net-pci,netdev=c,mac=$MAC_C,$NOSEG" \
		-netdev "tap,id=d,ifname=$TAPD,script=no,downscript=no" -device "virtio-net-pci,netdev=d,mac=$MAC_D,$NOSEG" \
		>"$T/vm/qemu.log" 2>&1 &
	QEMU_PID=$!
}
# Wait until the guest says READY or FAIL, QEMU exits, or @1 seconds pass. @return 0 ready, 1 the
# guest script failed (its console says why), 2 timed out, 3 QEMU exited.
vm_wait() {
	local end=$((SECONDS + $1))
	while [ $SECONDS -lt $end ]; do
		grep -aq '^NKV-ROUTER-READY' "$T/vm/console.log" 2>/dev/null && return 0
		grep -aq '^NKV-ROUTER-FAIL' "$T/vm/console.log" 2>/dev/null && return 1
		kill -0 "$QEMU_PID" 2>/dev/null || return 3
		sleep 0.2
	done
	return 2
}
vm_kill() {
	kill -KILL "$QEMU_PID" 2>/dev/null
	wait "$QEMU_PID" 2>/dev/null
	QEMU_PID=
}
vm_console() { echo "---- router VM console ----"; tr -d '\r' <"$T/vm/console.log"; echo "---- qemu ----"; cat "$T/vm/qemu.log"; echo "----"; }
# Wait until QEMU holds both taps open (its /proc fdinfo names them), at most 10 s.
taps_attached() {
	for _ in $(seq 100); do
		[ "$(cat /proc/"$QEMU_PID"/fdinfo/* 2>/dev/null | grep -c -e "iff:.$TAPC\$" -e "iff:.$TAPD\$")" -ge 2 ] && return 0
		kill -0 "$QEMU_PID" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}

if [ "$MODE" = vm ]; then
	export NKV_INTEROP_KERNEL_PKG=${NKV_NETEM_KERNEL_PKG:-linux-image-amd64}
	# Kernel + initramfs (cached; installs QEMU and friends where missing).
	if ! prep=$(bash "$ROOT/test/interop/prepare.sh" 2>&1); then
		echo "$prep" | tail -n 15
		skip "no netem in this kernel ($(uname -r)) and no router VM: test/interop/prepare.sh failed (apt unreachable?)"
	fi
	IDIR=$(echo "$prep" | sed -n 's/^NKV_INTEROP_DIR=//p' | tail -n 1)
	[ -s "$IDIR/vmlinux" ] || fail "prepare.sh gave no kernel: $prep"
	grep -qx sch_netem.ko "$IDIR/modules.list" || fail "the initramfs in $IDIR has no sch_netem.ko"
	command -v qemu-system-x86_64 >/dev/null || skip "no qemu-system-x86_64"
	KREL=$(basename "$IDIR" | sed 's/^linux-image-\(.*\)_.*/\1/')
	t_prep=$((SECONDS - t_start))

	# The guest script and its parameters, in a second cpio archive after the cached initramfs.
	mkdir -p "$T/vm/ov/interop"
	cp "$ROOT/test/faults/netem-router.sh" "$T/vm/ov/interop/router.sh"
	printf 'MAC_C=%s\nMAC_D=%s\nGW_C=%s\nGW_D=%s\nIMPAIR="%s"\n' "$MAC_C" "$MAC_D" "$GW_C" "$GW_D" "$IMPAIR" \
		>"$T/vm/ov/interop/env"
	(cd "$T/vm/ov" && find . | cpio -o -H newc --quiet) | gzip -1 >"$T/vm/ov.cpio.gz"
	cat "$IDIR/initramfs.cpio.gz" "$T/vm/ov.cpio.gz" >"$T/vm/initrd.img"

	ACCEL=${NKV_NETEM_ACCEL:-}
	if [ -z "$ACCEL" ]; then
		ACCEL=tcg
		# /dev/kvm alone is not enough: in some VMs it opens while the CPU exposes no virtualization,
		# and guests then hang in early boot.
		if [ -r /dev/kvm ] && [ -w /dev/kvm ] && grep -qw -e vmx -e svm /proc/cpuinfo; then ACCEL=kvm; fi
	fi
	case "$ACCEL" in kvm | tcg) ;; *) fail "NKV_NETEM_ACCEL=$ACCEL: kvm or tcg" ;; esac
	ip tuntap add dev "$TAPC" mode tap && ip tuntap add dev "$TAPD" mode tap &&
		ip link set "$TAPC" up && ip link set "$TAPD" up || fail "cannot create the taps $TAPC and $TAPD"
	t_boot=$SECONDS
	vm_boot "$ACCEL"
	# A KVM guest is up in seconds, or hangs, or QEMU stops at once (a nested KVM that half works): wait
	# for it here, while QEMU can still reopen the taps by name, and fall back to TCG.
	if [ "$ACCEL" = kvm ]; then
		krc=3
		taps_attached && { vm_wait 30; krc=$?; }
		[ $krc = 1 ] && { vm_console; fail "the router VM (KVM) did not come up (see its console)"; }
		if [ $krc != 0 ]; then
			[ -n "${NKV_NETEM_ACCEL:-}" ] && { vm_console; fail "the router VM (KVM) did not come up within 30 s"; }
			echo "router VM: KVM did not come up within 30 s ($(tr '\n' ' ' <"$T/vm/qemu.log" | head -c 300)); TCG instead"
			vm_kill
			ACCEL=tcg t_boot=$SECONDS
			vm_boot tcg
		fi
	fi
	taps_attached || { vm_console; fail "QEMU did not attach to $TAPC and $TAPD"; }
	# C and D, each with its tap, routing to the other through the guest.
	ip netns add "$NSC" || fail "cannot create namespace $NSC"
	ip link set "$TAPC" netns "$NSC" && ip link set "$TAPD" netns "$NS" &&
		in_nsc ip link set lo up && in_nsc ip addr add "$C_IP/30" dev "$TAPC" && in_nsc ip link set "$TAPC" up &&
		in_nsc ip route add "$D_IP/32" via "$GW_C" &&
		in_ns ip addr add "$D_IP/30" dev "$TAPD" && in_ns ip link set "$TAPD" up &&
		in_ns ip route add "$C_IP/32" via "$GW_D" ||
		fail "cannot set up the namespaces $NSC ($C_IP) and $NS ($D_IP) around the router VM"
fi

# ---- the cluster (while the guest boots) -------------------------------------------------------------

if [ "$MODE" = vm ]; then
	in_nsc bash "$ROOT/scripts/ceph-dev.sh" start --dir "$T/ceph" --addr "$C_IP" >"$T/ceph.log" 2>&1 ||
		{ cat "$T/ceph.log"; fail "the micro cluster did not start in namespace $NSC on $C_IP"; }
else
	in_ns bash "$ROOT/scripts/ceph-dev.sh" start --dir "$T/ceph" >"$T/ceph.log" 2>&1 ||
		{ cat "$T/ceph.log"; fail "the micro cluster did not start in namespace $NS"; }
fi
eval "$(bash "$ROOT/scripts/ceph-dev.sh" env --dir "$T/ceph")"
t_cluster=$((SECONDS - t_start))

case "$MODE" in
host)
	echo "netem in the host kernel ($(uname -r)): daemon and cluster in namespace $NS, impaired on its loopback"
	export NKV_FAULTS_IMPAIR="$IMPAIR on lo in namespace $NS"
	export NKV_FAULTS_IMPAIR_ON="ip netns exec $NS tc qdisc add dev lo root $IMPAIR"
	export NKV_FAULTS_IMPAIR_OFF="ip netns exec $NS tc qdisc del dev lo root"
	;;
tbf)
	IMPAIR="tbf rate 40mbit burst 64kb latency 50ms"
	echo "WARNING: no netem in this kernel ($(uname -r)); NKV_FAULTS_NETEM=tbf: impairing with '$IMPAIR' instead"
	export NKV_FAULTS_IMPAIR="$IMPAIR on lo in namespace $NS"
	export NKV_FAULTS_IMPAIR_ON="ip netns exec $NS tc qdisc add dev lo root $IMPAIR"
	export NKV_FAULTS_IMPAIR_OFF="ip netns exec $NS tc qdisc del dev lo root"
	;;
vm)
	vm_wait $((t_boot + ${NKV_NETEM_BOOT_TIMEOUT:-60} - SECONDS))
	rc=$?
	if [ $rc = 2 ] && ! grep -aq 'nkv-interop: init' "$T/vm/console.log"; then
		vm_console
		skip "the router VM ($ACCEL) did not reach its init within ${NKV_NETEM_BOOT_TIMEOUT:-60} s: too slow here"
	fi
	[ $rc = 0 ] || { vm_console; fail "the router VM did not come up (see its console)"; }
	t_vm=$((SECONDS - t_boot))
	echo "netem in router VM (kernel $KREL, ${ACCEL^^}): cluster in namespace $NSC ($C_IP), daemon in $NS ($D_IP)," \
		"routed through the guest ($GW_C, $GW_D); guest up in ${t_vm} s"
	# The daemon's namespace reaches the cluster through the guest: a write from there.
	in_ns timeout 30 rados -c "$NKV_CEPH_CONF" --keyring "$NKV_CEPH_KEYRING" -p "$NKV_CEPH_POOL" put .netem-probe /etc/hostname ||
		{ vm_console; fail "namespace $NS cannot write to the cluster on $C_IP through the router VM"; }
	bash "$0" --router-ctl "$T/vm" stats | sed 's/ok stats [^ ]* /forwarded so far: /'
	export NKV_FAULTS_IMPAIR="$IMPAIR on both NICs of the router VM (kernel $KREL, ${ACCEL^^})"
	export NKV_FAULTS_IMPAIR_ON="bash '$0' --router-ctl '$T/vm' on"
	export NKV_FAULTS_IMPAIR_OFF="bash '$0' --router-ctl '$T/vm' off"
	;;
esac
export NKV_FAULTS_NETNS=$NS NKV_FAULTS_ADDR=$NS_IP
echo "netem: daemon on $NS_IP (hosts on $HOST_IP), its own cluster in $T/ceph; ready after $((SECONDS - t_start)) s" \
	"(cluster up at ${t_cluster} s${t_prep:+, kernel and initramfs ready at ${t_prep} s})"
"$SUITE" netem --daemon "$D" "$@"
rc=$?
echo "netem: $MODE mode, exit $rc after $((SECONDS - t_start)) s"
exit $rc
