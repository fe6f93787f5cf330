#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# netem-router.sh - the guest side of the fault suite's router VM (test/faults/netem.sh boots it when
# the host kernel has no netem). It runs under busybox sh as the guest script of the interop
# initramfs (test/interop/init.sh has loaded virtio_net and sch_netem by then). The guest has two
# virtio-net NICs on two host taps, one in the cluster's network namespace and one in the daemon's;
# it forwards between them, so every packet between daemon and cluster crosses it, and it impairs
# that traffic with a real netem qdisc on both of its egress interfaces (one per direction) when told.
# /interop/env (netem.sh writes it into a second cpio archive) gives:
#   MAC_C, MAC_D   the MAC of the cluster-side and daemon-side NIC (PCI order is not relied on)
#   GW_C, GW_D     this guest's address on each side (a /30 with the namespace's address)
#   IMPAIR         the qdisc, e.g. "netem delay 100ms loss 5%"
# Commands come one a line on ttyS1 (QEMU: -serial pipe:DIR/ctl), each with a sequence token that the
# answer repeats, so a late answer is never taken for the current one:
#   on SEQ     add $IMPAIR on both interfaces     -> "ok on SEQ" | "err on SEQ <tc's message>"
#   off SEQ    its counters, then remove it       -> "ok off SEQ cluster side: ...; daemon side: ..."
#   stats SEQ  packets forwarded each way so far  -> "ok stats SEQ ..."
#   quit SEQ   answer, then end (init powers the guest off)
# The console (ttyS0) gets "NKV-ROUTER-READY <kernel> <ifaces>" once forwarding works and netem was
# tried on a NIC, or "NKV-ROUTER-FAIL <why>"; netem.sh waits for one of them.
. /interop/env
TC=/usr/sbin/tc   # iproute2's: busybox's tc applet has no netem
say() { echo "netem-router: $*"; }
fail() { echo "NKV-ROUTER-FAIL $*"; exit 1; }
ifname() { # the interface whose MAC is $1
	for n in /sys/class/net/*; do
		[ "$(cat "$n/address" 2>/dev/null)" = "$1" ] && { basename "$n"; return 0; }
	done
	return 1
}
i=0
until EC=$(ifname "$MAC_C") && ED=$(ifname "$MAC_D"); do
	[ $i -lt 100 ] || fail "no NIC with MAC $MAC_C and $MAC_D: $(ls /sys/class/net)"
	sleep 0.1
	i=$((i + 1))
done
# init.sh gave eth0 QEMU user networking's 10.0.2.15/24: not this VM's network.
ip addr flush dev "$EC"
ip addr flush dev "$ED"
ip addr add "$GW_C/30" dev "$EC" && ip link set "$EC" up &&
	ip addr add "$GW_D/30" dev "$ED" && ip link set "$ED" up || fail "cannot configure $EC/$ED"
echo 1 >/proc/sys/net/ipv4/ip_forward || fail "cannot turn on IPv4 forwarding"
# GRO would merge the packets of a TCP stream into one before the qdisc, and netem would drop or delay
# the merged packet whole: off, so that "loss 5%" is 5 % of the packets (netem.sh turns the
# segmentation offloads of the NICs off for the same reason).
for e in "$EC" "$ED"; do
	out=$(/usr/sbin/ethtool -K "$e" gro off 2>&1) || fail "ethtool -K $e gro off: $out"
done
out=$($TC qdisc add dev "$EC" root netem delay 1ms 2>&1) || fail "no netem in this kernel ($(uname -r)): $out"
$TC qdisc del dev "$EC" root
stty -F /dev/ttyS1 raw -echo || fail "cannot set up the command line ttyS1"
exec 3<>/dev/ttyS1

counters() { # "N pkt (N bytes), M dropped" of the root qdisc of $1
	$TC -s qdisc show dev "$1" | sed -n 's/.*Sent \([0-9]*\) bytes \([0-9]*\) pkt (dropped \([0-9]*\).*/\2 pkt (\1 bytes), \3 dropped/p' |
		head -n 1
}
stats() {
	echo "cluster side ($EC): $(counters "$EC"); daemon side ($ED): $(counters "$ED")"
}

echo "NKV-ROUTER-READY $(uname -r) cluster side $EC $GW_C, daemon side $ED $GW_D"
while read -r cmd seq <&3; do
	case "$cmd" in
	on)
		if out=$({ $TC qdisc replace dev "$EC" root $IMPAIR && $TC qdisc replace dev "$ED" root $IMPAIR; } 2>&1); then
			say "impaired: $IMPAIR on $EC and $ED"
			echo "ok on $seq" >&3
		else
			echo "err on $seq $out" >&3
		fi
		;;
	off)
		# The counters of the netem qdiscs themselves: the impaired packets, the ones netem dropped.
		st=$(stats)
		if out=$({ $TC qdisc del dev "$EC" root && $TC qdisc del dev "$ED" root; } 2>&1); then
			say "impairment removed; it saw $st"
			echo "ok off $seq $st" >&3
		else
			echo "err off $seq $out" >&3
		fi
		;;
	stats) echo "ok stats $seq $(stats)" >&3 ;;
	quit)
		echo "ok quit $seq" >&3
		break
		;;
	*) echo "err $cmd $seq unknown command" >&3 ;;
	esac
done
exit 0
