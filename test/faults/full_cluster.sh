#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# full_cluster.sh - a full cluster under load: Stores answer 81h (Capacity Exceeded) at once instead
# of hanging, Retrieve and Delete keep working (a Delete frees space), values stored before stay
# intact, and Stores succeed again within seconds once the cluster has room. The micro cluster is made
# "full" by lowering its full ratios (then restored, also on exit): run it alone.
#   bash test/faults/full_cluster.sh PATH/rados-nkv PATH/nkv
set -u
D=$1 N=$2
[ -n "${NKV_CEPH_CONF:-}" ] || { [ "${NKV_REQUIRE_RADOS:-0}" = 1 ] && { echo "FAIL - no cluster"; exit 1; }; echo "skip: no cluster"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}/nkv-full.XXXXXX")
PASS=0 FAILN=0 DPID=
ok() { PASS=$((PASS + 1)); echo "ok - $*"; }
fail() { FAILN=$((FAILN + 1)); echo "FAIL - $*"; }
ceph_() { timeout 20 ceph -c "$NKV_CEPH_CONF" -n "client.${NKV_CEPH_USER:-admin}" --keyring "$NKV_CEPH_KEYRING" "$@"; }
ratios() { ceph_ osd set-nearfull-ratio "$1" >/dev/null 2>&1; ceph_ osd set-backfillfull-ratio "$2" >/dev/null 2>&1
	ceph_ osd set-full-ratio "$3" >/dev/null 2>&1; }
is_full() { ceph_ osd dump 2>/dev/null | grep -q '^osd\.0 .*exists,full'; }
cleanup() { ratios 0.85 0.90 0.95; [ -n "$DPID" ] && kill -KILL "$DPID" 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
ms() { echo $(( $(date +%s%N) / 1000000 )); }
P=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
NS="full-$$-$RANDOM"
"$D" -b rados --ceph-conf "$NKV_CEPH_CONF" --keyring "$NKV_CEPH_KEYRING" --client-id "${NKV_CEPH_USER:-admin}" \
	-p "${NKV_CEPH_POOL:-nkv}" --ns "1:$NS" -l "127.0.0.1:$P" -d none --op-timeout 5 --pid-file "$T/pid" 2>"$T/d.log" &
DPID=$!
for _ in $(seq 200); do [ "$(cat "$T/pid" 2>/dev/null)" = "$DPID" ] && break; sleep 0.1; done
[ "$(cat "$T/pid" 2>/dev/null)" = "$DPID" ] || { fail "daemon did not start: $(cat "$T/d.log")"; exit 1; }
head -c 262144 /dev/urandom >"$T/before"
# The cluster may still be peering after a previous test restarted its OSD: the first Store may
# answer 82h for a while (that is not what this test is about), so it is retried for up to 60 s.
t0=$(ms)
until timeout 20 "$N" -s "$P" store before "$T/before" >/dev/null 2>&1; do
	[ $(($(ms) - t0)) -lt 60000 ] || break
	sleep 1
done
timeout 20 "$N" -s "$P" exist before >/dev/null 2>&1 && ok "a Store before the cluster is full ($(($(ms) - t0)) ms)" || fail "Store before"

ratios 0.00001 0.00002 0.00003
for _ in $(seq 60); do is_full && break; sleep 0.5; done
is_full && ok "the OSD reports full" || fail "the OSD never reported full"

# Load: 4 writers x 20 Stores of 256 KiB; each must answer 81h, none may wait for space.
for w in 1 2 3 4; do
	( for i in $(seq 20); do
		t0=$(ms); OUT=$(timeout 20 "$N" -s "$P" store "w$w-$i" "$T/before" 2>&1); rc=$?; t1=$(ms)
		echo "$rc $((t1 - t0)) $(grep -c 'Capacity Exceeded' <<<"$OUT")"
	done >"$T/w$w" ) &
done
wait $(jobs -p | grep -v "^$DPID$") 2>/dev/null
cat "$T"/w? >"$T/all"
n=$(wc -l <"$T/all"); n81=$(awk '$1 == 1 && $3 == 1' "$T/all" | wc -l); slow=$(awk '$2 > 2000' "$T/all" | wc -l)
[ "$n" = 80 ] && [ "$n81" = 80 ] && ok "80 of 80 Stores under load answered 81h Capacity Exceeded" ||
	fail "$n81 of $n Stores answered 81h: $(sort -u "$T/all" | head -5)"
max=$(awk 'BEGIN {m = 0} $2 > m {m = $2} END {print m}' "$T/all")
[ "$slow" = 0 ] && ok "none waited for space: slowest ${max} ms (CLI start included)" || fail "$slow Stores took over 2 s (slowest ${max} ms)"
timeout 20 "$N" -s "$P" retrieve before "$T/back" >/dev/null 2>&1 && cmp -s "$T/before" "$T/back" &&
	ok "a value stored before reads back intact while full" || fail "Retrieve while full"
timeout 20 "$N" -s "$P" store extra "$T/before" >/dev/null 2>&1
timeout 20 "$N" -s "$P" delete before >/dev/null 2>&1 && ok "a Delete succeeds while full (it frees space)" ||
	fail "Delete while full"

ratios 0.85 0.90 0.95
t0=$(ms); okat=0
for _ in $(seq 120); do
	if timeout 20 "$N" -s "$P" store after "$T/before" >/dev/null 2>&1; then okat=$(ms); break; fi
	sleep 0.5
done
[ "$okat" -gt 0 ] && ok "Stores succeed again $((okat - t0)) ms after the ratios are restored" || fail "Stores still refused 60 s later"
timeout 20 "$N" -s "$P" retrieve after "$T/back" >/dev/null 2>&1 && cmp -s "$T/before" "$T/back" &&
	ok "and read back intact" || fail "Retrieve after"
timeout 20 "$N" -s "$P" delete after >/dev/null 2>&1
kill -TERM "$DPID"; wait "$DPID"; rc=$?; DPID=
[ "$rc" = 0 ] && ok "the daemon stops cleanly" || fail "daemon exit $rc"
echo "$PASS passed, $FAILN failed"
[ "$FAILN" = 0 ]
