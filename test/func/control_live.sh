#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# control_live.sh - issue 12's live-change test: while `nkv bench` (mix of Stores and Retrieves,
# every value verified, QD 8 on 2 connections) runs on namespace 1, nkv-ctl adds and removes
# namespace 2 and adds and removes a host on the allowlist, 20 times each. Namespace 1 must see zero
# errors and no command may hang (bench's exit status, its error count, a bounded run time); a host
# connected to namespace 2 sees it go (0Bh); a disallowed host is disconnected.
#   control_live.sh PATH/rados-nkv PATH/nkv-ctl PATH/nkv mem|rados
# rados needs NKV_CEPH_CONF (else exit 77, or 1 with NKV_REQUIRE_RADOS=1).
set -u
D=$1 CTL=$2 NKV=$3 BACKEND=${4:-mem}
pass=0 fail=0
ok() { echo "ok - $*"; pass=$((pass + 1)); }
bad() { echo "FAIL - $*"; fail=$((fail + 1)); }
check() { local what=$1; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }
args=(--backend mem)
if [ "$BACKEND" = rados ]; then
	if [ -z "${NKV_CEPH_CONF:-}" ]; then
		[ "${NKV_REQUIRE_RADOS:-0}" = 1 ] && { echo "FAIL - no cluster"; echo "0 passed, 1 failed"; exit 1; }
		echo "skip: no cluster (NKV_CEPH_CONF unset)"; exit 77
	fi
	args=(--ceph-conf "$NKV_CEPH_CONF" --client-id "${NKV_CEPH_USER:-admin}" ${NKV_CEPH_KEYRING:+--keyring "$NKV_CEPH_KEYRING"} --op-timeout 10)
fi
POOL=${NKV_CEPH_POOL:-nkv}
T=$(mktemp -d "${TMPDIR:-/tmp}/nkv-ctllive.XXXXXX")
NQN=nqn.2026-12.io.rados-nkv:live-$$
HOST=nqn.2026-12.io.test:bench-host
OTHER=nqn.2026-12.io.test:other-host
PID=""
cleanup() { [ -n "$PID" ] && kill -KILL "$PID" 2>/dev/null; wait 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
"$D" "${args[@]}" -l 127.0.0.1:0 -d none --control "unix:$T/ctl.sock" --shm-dir "$T" --pid-file "$T/pid" \
	-s "$NQN" -p "$POOL" --ns "1:live-$$-1" --allow-host "$HOST" >"$T/d.log" 2>&1 &
PID=$!
for _ in $(seq 300); do [ -s "$T/pid" ] && break; kill -0 "$PID" 2>/dev/null || break; sleep 0.05; done
PORT=$(grep -o 'NVMe/TCP on 127\.0\.0\.1:[0-9]*' "$T/d.log" | tail -1 | sed 's/.*://')
[ -n "$PORT" ] || { cat "$T/d.log"; echo "FAIL - the daemon did not start"; echo "0 passed, 1 failed"; exit 1; }
ctl() { "$CTL" --server "unix:$T/ctl.sock" "$@"; }
nkv() { "$NKV" -q "$HOST" -s "$PORT" -n "$NQN" "$@"; }

# A host on namespace 2 (added once before the load) sees it removed: 0Bh.
check "ns add 2" ctl ns add "$NQN" --nsid 2 --rados-ns "live-$$-2"
check "Store on namespace 2" bash -c "echo v2 | '$NKV' -q '$HOST' -s $PORT -n '$NQN' --nsid 2 store k -"
check "ns del 2" ctl ns del "$NQN" 2
out=$(nkv --nsid 2 retrieve k - 2>&1); rc=$?
check "Retrieve on the removed namespace fails with Invalid Namespace ($rc: $out)" bash -c "[ $rc != 0 ] && echo '$out' | grep -qi 'namespace'"

start=$(date +%s)
nkv -o json bench mode=mix qd=8 conns=2 size=4K,64K keys=256 mix=r60w40e0 time=12 warmup=0 >"$T/bench.json" 2>"$T/bench.err" &
BENCH=$!
changes=0 cfail=0
sleep 1
for i in $(seq 20); do
	ctl ns add "$NQN" --nsid 2 --rados-ns "live-$$-2" >/dev/null || cfail=$((cfail + 1))
	ctl host allow "$NQN" "$OTHER" >/dev/null || cfail=$((cfail + 1))
	ctl ns del "$NQN" 2 >/dev/null || cfail=$((cfail + 1))
	ctl host disallow "$NQN" "$OTHER" >/dev/null || cfail=$((cfail + 1))
	changes=$((changes + 4))
done
t_changes=$(($(date +%s) - start))
wait $BENCH
brc=$?
elapsed=$(($(date +%s) - start))
echo "$changes control-plane changes in ${t_changes} s under load; bench exit $brc after ${elapsed} s"
check "all $changes changes succeeded ($cfail failed)" [ "$cfail" = 0 ]
check "bench on namespace 1: exit 0, every value verified" [ "$brc" = 0 ]
errs=$(grep -o '"errors":[0-9]*' "$T/bench.json" | sed 's/.*://' | sort -n | tail -1)
check "bench on namespace 1: zero errors (${errs:-?})" [ "${errs:-1}" = 0 ]
check "no command hung (bench ended in ${elapsed} s for a 12 s run)" [ "$elapsed" -le 90 ]
[ "$brc" = 0 ] || { tail -5 "$T/bench.err"; head -c 2000 "$T/bench.json"; }

# A disallowed host is disconnected: a long bench from OTHER ends when it is disallowed.
check "allow the other host" ctl host allow "$NQN" "$OTHER"
"$NKV" -q "$OTHER" -s "$PORT" -n "$NQN" bench mode=mix qd=1 keys=16 time=20 warmup=0 >/dev/null 2>"$T/other.err" &
OB=$!
sleep 1.5
n=$(ctl -o json connections "$NQN" | grep -o "\"host_nqn\":\"$OTHER\"" | wc -l)
check "the other host is connected ($n controllers)" [ "$n" -ge 1 ]
t0=$(date +%s%N)
check "disallow it" ctl host disallow "$NQN" "$OTHER"
wait $OB
orc=$?
dt=$((($(date +%s%N) - t0) / 1000000))
echo "the disallowed host's bench ended ${dt} ms after DisallowHost (exit $orc)"
check "its bench ended (exit $orc) within 5 s (${dt} ms)" test "$orc" != 0 -a "$dt" -le 5000
n=$(ctl -o json connections "$NQN" | grep -o "\"host_nqn\":\"$OTHER\"" | wc -l)
check "no controller of it left ($n)" [ "$n" = 0 ]
check "the allowed host still works" bash -c "echo x | '$NKV' -q '$HOST' -s $PORT -n '$NQN' store after -"
# Shared memory: a subsystem created live is served on its socket; deleted, the socket refuses; created
# again on the same path, it is served again (the socket is taken over, not "in use").
S2=nqn.2026-12.io.rados-nkv:live-shm-$$
check "subsystem add with a shared-memory socket" ctl subsystem add "$S2" --pool "$POOL" --allow-any-host --shm "$T/s2.sock"
check "ns add on it" ctl ns add "$S2" --nsid 1 --rados-ns "live-$$-s2"
check "Store over shm" bash -c "echo shm | '$NKV' -t 'shm:$T/s2.sock' store k -"
check "subsystem del" ctl subsystem del "$S2"
check "the socket refuses hosts once the subsystem is gone" bash -c "! echo x | '$NKV' -t 'shm:$T/s2.sock' store k - 2>/dev/null"
check "subsystem add again on the same socket" ctl subsystem add "$S2" --pool "$POOL" --allow-any-host --shm "$T/s2.sock"
check "ns add again" ctl ns add "$S2" --nsid 1 --rados-ns "live-$$-s2"
check "Store over shm again" bash -c "echo shm2 | '$NKV' -t 'shm:$T/s2.sock' store k -"
# A listener added live is bound before the reply: the reply says it is active.
LP=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
out=$(ctl listener add "127.0.0.1:$LP" 2>&1)
check "listener add replies active once bound ($out)" bash -c "echo '$out' | grep -q ', active\$'"
check "and it serves: Store through it" bash -c "echo l | '$NKV' -q '$HOST' -s $LP -n '$NQN' store viaadded -"
kill -TERM "$PID"; wait "$PID"; drc=$?; PID=""
check "the daemon stops cleanly (exit $drc)" [ "$drc" = 0 ]
[ "$fail" = 0 ] || tail -40 "$T/d.log"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
