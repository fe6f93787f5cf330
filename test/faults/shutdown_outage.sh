#!/usr/bin/env bash
# shutdown_outage.sh - the daemon stops within its deadlines while the whole cluster is down: monitor
# and OSD killed with a Store in flight, then SIGTERM; it must exit 0 within grace + op timeout + 5 s
# (a blocking OSD map request without a timeout once held shutdown forever). Needs the micro cluster
# (NKV_CEPH_DIR, NKV_CEPH_CONF...) and restarts its daemons afterwards: run it alone.
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
echo v >"$T/v"
timeout 20 "$N" -s "$P" store warm "$T/v" >/dev/null 2>&1 && ok "a Store before the outage" || fail "Store before the outage"
dev kill osd.0 && dev kill mon.a || fail "kill the cluster"
OUT=$(timeout 20 "$N" -s "$P" store during "$T/v" 2>&1); rc=$?
[ "$rc" = 1 ] && grep -q "Namespace Not Ready" <<<"$OUT" && ok "a Store during the outage answers 82h" || fail "during the outage: exit $rc, $OUT"
t0=$(date +%s%N)
kill -TERM "$DPID"
for _ in $(seq 200); do kill -0 "$DPID" 2>/dev/null || break; sleep 0.1; done
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
if kill -0 "$DPID" 2>/dev/null; then
	fail "still running ${ms} ms after SIGTERM with the cluster down"; kill -KILL "$DPID"
else
	wait "$DPID"; rc=$?
	[ "$rc" = 0 ] && [ "$ms" -le 10000 ] && ok "SIGTERM with the cluster down: exit 0 in ${ms} ms" || fail "exit $rc after ${ms} ms"
fi
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
