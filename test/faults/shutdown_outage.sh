#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# shutdown_outage.sh - the daemon stops within its deadlines while the whole cluster is down: monitor
# and OSD killed with a Store in flight, then SIGTERM; it must exit 0 within grace + op timeout + 5 s
# (a blocking OSD map request without a timeout once held shutdown forever). A second daemon serves
# CACHE_NS cache namespaces (each with a share to write and an eviction lease to release at its
# stop): it must stop within the same bound, 2 x op timeout + grace + 2 s, whatever their number
# (one op timeout per namespace, one after another, once took 10-13 op timeouts for 4). Needs the
# micro cluster (NKV_CEPH_DIR, NKV_CEPH_CONF...) and restarts its daemons afterwards: run it alone.
#   bash test/faults/shutdown_outage.sh PATH/rados-nkv PATH/nkv
set -u
D=$1 N=$2
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
[ -n "${NKV_CEPH_DIR:-}" ] || { [ "${NKV_REQUIRE_RADOS:-0}" = 1 ] && { echo "FAIL - no cluster"; exit 1; }; echo "skip: no cluster"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}/nkv-shut.XXXXXX")
PASS=0 FAILN=0
ok() { PASS=$((PASS + 1)); echo "ok - $*"; }
fail() { FAILN=$((FAILN + 1)); echo "FAIL - $*"; }
dev() { bash "$ROOT/scripts/ceph-dev.sh" "$@" --dir "$NKV_CEPH_DIR"; }
revive() { dev revive mon.a; dev revive osd.0; }
trap 'revive >/dev/null 2>&1; rm -rf "$T"' EXIT
P=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$D" -b rados --ceph-conf "$NKV_CEPH_CONF" --keyring "$NKV_CEPH_KEYRING" --client-id "${NKV_CEPH_USER:-admin}" \
	-p "${NKV_CEPH_POOL:-nkv}" -l "127.0.0.1:$P" -d none --op-timeout 3 --grace-ms 2000 --pid-file "$T/pid" 2>"$T/d.log" &
DPID=$!
for _ in $(seq 200); do [ "$(cat "$T/pid" 2>/dev/null)" = "$DPID" ] && break; sleep 0.1; done
[ "$(cat "$T/pid" 2>/dev/null)" = "$DPID" ] && ok "daemon up" || { fail "daemon did not start: $(cat "$T/d.log")"; exit 1; }
# The cache daemon: CACHE_NS cache namespaces, op timeout 3 s, grace 2 s.
CACHE_NS=6
P2=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
NQN=nqn.2026-12.io.rados-nkv:shutdown-cache
nss=$(for i in $(seq "$CACHE_NS"); do printf '%s{"nsid": %d, "rados_namespace": "shut-%d-%d", "cache": {"capacity": "1M", "lease_ms": 3000}}' "$([ "$i" = 1 ] || echo ,)" "$i" "$$" "$i"; done)
cat >"$T/cache.json" <<EOF
{"backend": {"type": "rados", "ceph_conf": "$NKV_CEPH_CONF", "keyring": "${NKV_CEPH_KEYRING:-}", "client_id": "${NKV_CEPH_USER:-admin}", "op_timeout_s": 3},
 "listeners": [{"address": "127.0.0.1", "port": $P2}], "discovery": false, "shutdown_grace_ms": 2000, "log_level": "info",
 "subsystems": [{"nqn": "$NQN", "pool": "${NKV_CEPH_POOL:-nkv}", "namespaces": [$nss]}]}
EOF
"$D" -c "$T/cache.json" --gateway-name "shut-$$" --pid-file "$T/pid2" 2>"$T/d2.log" &
CPID=$!
for _ in $(seq 200); do [ "$(cat "$T/pid2" 2>/dev/null)" = "$CPID" ] && break; sleep 0.1; done
[ "$(cat "$T/pid2" 2>/dev/null)" = "$CPID" ] && ok "cache daemon up ($CACHE_NS cache namespaces)" || { fail "cache daemon did not start: $(cat "$T/d2.log")"; exit 1; }
echo v >"$T/v"
timeout 20 "$N" -s "$P" store warm "$T/v" >/dev/null 2>&1 && ok "a Store before the outage" || fail "Store before the outage"
# Every namespace's share read back and its lease taken before the outage (the lease log line).
for _ in $(seq 200); do [ "$(grep -c 'evicts and expires entries now' "$T/d2.log")" -ge "$CACHE_NS" ] && break; sleep 0.1; done
n=$(grep -c 'evicts and expires entries now' "$T/d2.log")
[ "$n" -ge "$CACHE_NS" ] && ok "the cache daemon holds the $CACHE_NS eviction leases" || fail "leases held: $n of $CACHE_NS"
for i in $(seq "$CACHE_NS"); do timeout 20 "$N" -s "$P2" -n "$NQN" --nsid "$i" store "c$i" "$T/v" >/dev/null 2>&1 || fail "cache Store nsid $i"; done
dev kill osd.0 && dev kill mon.a || fail "kill the cluster"
OUT=$(timeout 20 "$N" -s "$P" store during "$T/v" 2>&1); rc=$?
[ "$rc" = 1 ] && grep -q "Namespace Not Ready" <<<"$OUT" && ok "a Store during the outage answers 82h" || fail "during the outage: exit $rc, $OUT"
# Both daemons told at once; each timed from the signal. 60 s at most (then SIGKILL).
t0=$(date +%s%N)
kill -TERM "$DPID" "$CPID"
ms1= ms2=
for _ in $(seq 600); do
	[ -z "$ms1" ] && ! kill -0 "$DPID" 2>/dev/null && ms1=$(( ($(date +%s%N) - t0) / 1000000 ))
	[ -z "$ms2" ] && ! kill -0 "$CPID" 2>/dev/null && ms2=$(( ($(date +%s%N) - t0) / 1000000 ))
	[ -n "$ms1" ] && [ -n "$ms2" ] && break
	sleep 0.1
done
for pair in "$DPID:${ms1:-}:plain" "$CPID:${ms2:-}:$CACHE_NS cache namespaces"; do
	pid=${pair%%:*} rest=${pair#*:}; ms=${rest%%:*} what=${rest#*:}
	if [ -z "$ms" ]; then
		fail "$what: still running 60 s after SIGTERM with the cluster down"; kill -KILL "$pid"; wait "$pid"
	else
		wait "$pid"; rc=$?
		[ "$rc" = 0 ] && [ "$ms" -le 10000 ] && ok "$what: SIGTERM with the cluster down: exit 0 in ${ms} ms (bound 10000)" ||
			fail "$what: exit $rc after ${ms} ms (bound 10000 ms: 2 x op timeout 3 s + grace 2 s + 2 s)"
	fi
done
revive >/dev/null 2>&1 || fail "revive the cluster"
# Leave the cluster as it was found: writable again (the OSD peers after its restart), so that the
# next test does not start against a cluster still coming back.
t0=$(date +%s)
until timeout 10 rados -c "$NKV_CEPH_CONF" ${NKV_CEPH_KEYRING:+--keyring "$NKV_CEPH_KEYRING"} -n "client.${NKV_CEPH_USER:-admin}" 	-p "${NKV_CEPH_POOL:-nkv}" put "nkv-shut-probe-$$" "$T/v" >/dev/null 2>&1; do
	[ $(($(date +%s) - t0)) -lt 90 ] || { fail "the cluster did not accept writes within 90 s of the restart"; break; }
	sleep 1
done
timeout 10 rados -c "$NKV_CEPH_CONF" ${NKV_CEPH_KEYRING:+--keyring "$NKV_CEPH_KEYRING"} -n "client.${NKV_CEPH_USER:-admin}" 	-p "${NKV_CEPH_POOL:-nkv}" rm "nkv-shut-probe-$$" >/dev/null 2>&1
echo "the cluster accepts writes again $(($(date +%s) - t0)) s after the restart"
echo "$PASS passed, $FAILN failed"
[ "$FAILN" = 0 ]
