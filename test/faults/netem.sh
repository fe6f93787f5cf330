#!/usr/bin/env bash
# netem.sh - the fault suite's network scenario: delay and loss between the rados-nkv daemon and the
# cluster, under load. It makes a network namespace with a micro cluster of its own (memstore) and
# runs the daemon inside it; the suite's hosts stay outside and reach the daemon through a veth pair,
# so `tc qdisc ... netem delay 100ms loss 5%` on the namespace's loopback delays and drops the
# daemon's cluster traffic (and the cluster's own), never the hosts' and nothing outside the
# namespace. fault_suite netem applies it, removes it, and checks the suite's invariant.
#   bash test/faults/netem.sh PATH/fault_suite PATH/rados-nkv [--long]
# Needs root and the sch_netem qdisc; without them: exit 77 (skipped) saying why, or 1 with
# NKV_REQUIRE_NETEM=1. NKV_FAULTS_NETEM=tbf on a kernel without netem uses a tbf rate limit instead
# (queueing delay and tail drops: not netem, but it checks this test's plumbing); it says so.
set -u
SUITE=$1 D=$2
shift 2
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
skip() {
	if [ "${NKV_REQUIRE_NETEM:-0}" = 1 ]; then echo "FAIL - $* (NKV_REQUIRE_NETEM=1)"; exit 1; fi
	echo "skip: $*"
	exit 77
}
[ "$(id -u)" = 0 ] || skip "needs root (a network namespace, a veth pair, tc)"
command -v ip >/dev/null && command -v tc >/dev/null || skip "needs iproute2 (ip, tc)"
NS=nkvf$$
SUB=$(($$ % 250 + 1))               # 198.18.0.0/15 is for benchmarks (RFC 2544): no real network uses it
HOST_IP=198.18.$SUB.1 NS_IP=198.18.$SUB.2
T=$(mktemp -d "${TMPDIR:-/tmp}/nkv-netem.XXXXXX")
cleanup() {
	[ -f "$T/ceph/state" ] && bash "$ROOT/scripts/ceph-dev.sh" stop --dir "$T/ceph" >/dev/null 2>&1
	ip netns del "$NS" 2>/dev/null   # takes its end of the veth pair, and so the pair, along
	ip link del "h$NS" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT
in_ns() { ip netns exec "$NS" "$@"; }

ip netns add "$NS" || skip "cannot create a network namespace"
in_ns ip link set lo up &&
	ip link add "h$NS" type veth peer name "n$NS" && ip link set "n$NS" netns "$NS" &&
	ip addr add "$HOST_IP/30" dev "h$NS" && ip link set "h$NS" up &&
	in_ns ip addr add "$NS_IP/30" dev "n$NS" && in_ns ip link set "n$NS" up ||
	{ echo "FAIL - cannot set up the veth pair $HOST_IP <-> $NS_IP"; exit 1; }

IMPAIR="netem delay 100ms loss 5%"
if ! in_ns tc qdisc add dev lo root netem delay 1ms 2>/dev/null; then
	modprobe sch_netem 2>/dev/null
	if ! in_ns tc qdisc add dev lo root netem delay 1ms 2>/dev/null; then
		[ "${NKV_FAULTS_NETEM:-}" = tbf ] ||
			skip "this kernel ($(uname -r)) has no netem qdisc (sch_netem, CONFIG_NET_SCH_NETEM; modprobe failed)"
		IMPAIR="tbf rate 40mbit burst 64kb latency 50ms"
		echo "WARNING: no netem in this kernel ($(uname -r)); NKV_FAULTS_NETEM=tbf: impairing with '$IMPAIR' instead"
	fi
fi
in_ns tc qdisc del dev lo root 2>/dev/null

in_ns bash "$ROOT/scripts/ceph-dev.sh" start --dir "$T/ceph" >"$T/ceph.log" 2>&1 ||
	{ cat "$T/ceph.log"; echo "FAIL - the micro cluster did not start in namespace $NS"; exit 1; }
eval "$(bash "$ROOT/scripts/ceph-dev.sh" env --dir "$T/ceph")"
export NKV_FAULTS_NETNS=$NS NKV_FAULTS_ADDR=$NS_IP NKV_FAULTS_IMPAIR="$IMPAIR"
export NKV_FAULTS_IMPAIR_ON="ip netns exec $NS tc qdisc add dev lo root $IMPAIR"
export NKV_FAULTS_IMPAIR_OFF="ip netns exec $NS tc qdisc del dev lo root"
echo "netem: namespace $NS (daemon on $NS_IP, hosts on $HOST_IP), its own cluster in $T/ceph"
"$SUITE" netem --daemon "$D" "$@"
