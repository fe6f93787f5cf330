#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# ec_pool.sh - the daemon on an erasure-coded pool (k=2, m=1; scripts/ceph-dev.sh start --osds 3
# --ec-pool NAME), feature by feature, each either working or failing with a clear status and a log
# line naming the reason, never a wrong answer:
#   - Store (new, replaced, --must-exist/--must-not-exist), Retrieve (whole, large values read in
#     ranges, Retrieve Range), Exist, List, Delete: work (write_full, xattrs, reads at offsets);
#   - Exec: a method that only answers (hello.say_hello) works; one that reads the object's data
#     (a bound Lua script calling objclass.read) is refused by the OSD: C0h, and the daemon's log
#     says the pool is erasure-coded and why;
#   - a cache namespace: refused at start without a meta pool (the log names the pool and the fix),
#     bad --meta-pool values refused, an erasure-coded meta pool refused; with --meta-pool (the
#     replicated pool) it runs, TTLs work, and its usage share lands in the meta pool's omap
#     (rados_nkv.cache@POOL in the same RADOS namespace), nothing of it in the EC pool;
#   - --group on an erasure-coded --group-pool: refused at start, naming the pool.
#
#   bash test/func/ec_pool.sh BUILD_DIR     # the cluster of scripts/ceph-dev.sh env, with NKV_CEPH_EC_POOL
#
# Every check prints "ok - ..." or "FAIL - ..."; the last line is "N passed, N failed".
set -u
NAME=ec-pool
. "$(dirname "$0")/cli_lib.sh" "${1:?usage: $0 BUILD_DIR}" rados
EC=${NKV_CEPH_EC_POOL:-}
META=${NKV_CEPH_POOL:-nkv}
if [ -z "$EC" ]; then
	echo "FAIL - no erasure-coded pool (NKV_CEPH_EC_POOL; scripts/ceph-dev.sh start --osds 3 --ec-pool NAME)"
	echo "0 passed, 1 failed"; exit 1
fi
NQN=nqn.2026-11.io.rados-nkv:ec-pool
RADOS=(timeout 20 rados -c "$NKV_CEPH_CONF" --keyring "$NKV_CEPH_KEYRING" -n "client.${NKV_CEPH_USER:-admin}")
BACKEND_JSON="\"type\": \"rados\", \"ceph_conf\": \"$NKV_CEPH_CONF\", \"keyring\": \"$NKV_CEPH_KEYRING\", \"client_id\": \"${NKV_CEPH_USER:-admin}\""

# start_daemon CONF [FLAGS...]: the daemon in the background, waiting for its pid file (else its exit).
start_daemon() {
	local conf=$1; shift
	rm -f "$T/pid"
	"$D" -c "$conf" --pid-file "$T/pid" "$@" 2>"$T/d.log" &
	DPID=$!
	for _ in $(seq 200); do
		[ "$(cat "$T/pid" 2>/dev/null)" = "$DPID" ] && return 0
		kill -0 "$DPID" 2>/dev/null || { wait "$DPID"; DRC=$?; DPID=; return 1; }
		sleep 0.1
	done
	return 1
}
stop_daemon() { [ -n "$DPID" ] && { kill -TERM "$DPID"; wait "$DPID"; }; DPID=; }

# --- 1. a plain namespace: the KV commands --------------------------------------------------------
cat >"$T/plain.json" <<EOF
{"backend": {$BACKEND_JSON}, "listeners": [{"address": "127.0.0.1", "port": $P}], "discovery": false,
 "control": {"address": "none"},
 "subsystems": [{"nqn": "$NQN", "pool": "$EC",
  "namespaces": [{"nsid": 1, "rados_namespace": "$RNS",
    "exec": [{"opcode": "0x82", "class": "hello", "method": "say_hello", "mode": "read", "input": "ec-", "append_host_input": true},
             {"opcode": "0x86", "class": "lua", "method": "eval_json", "mode": "read", "script_file": "$T/read.lua", "handler": "rd"}]}]}]}
EOF
printf 'function rd(input, output)\n  output:append(objclass.read(0, 4):str())\nend\nobjclass.register(rd)\n' >"$T/read.lua"
start_daemon "$T/plain.json" || { cat "$T/d.log"; echo "FAIL - daemon did not start on $EC"; echo "0 passed, 1 failed"; exit 1; }
grep -q "pool '$EC' is erasure-coded: a method that reads the object's data or writes omap is refused there" "$T/d.log" &&
	ok "the start log says what Exec cannot do on the erasure-coded pool" || fail "no start line for Exec on $EC: $(cat "$T/d.log")"
C=("$N" -s "$P" -n "$NQN")
head -c 4096 /dev/urandom >"$T/small"
head -c $((5 << 20)) /dev/urandom >"$T/big"   # read in ranges (cut-through from 2 MiB buffers)
run 20 "${C[@]}" store small "$T/small"
check "Store 4 KiB" 0 "stored small"
run 20 "${C[@]}" store big "$T/big"
check "Store 5 MiB" 0 "stored big"
run 20 "${C[@]}" retrieve small "$T/o1"
[ "$RC" = 0 ] && cmp -s "$T/small" "$T/o1" && ok "Retrieve 4 KiB: the same bytes" || fail "Retrieve 4 KiB: $RC $OUT"
run 30 "${C[@]}" retrieve big "$T/o2"
[ "$RC" = 0 ] && cmp -s "$T/big" "$T/o2" && ok "Retrieve 5 MiB: the same bytes" || fail "Retrieve 5 MiB: $RC $OUT"
run 20 "${C[@]}" retrieve big "$T/o3" --offset 3000000 --max-size 100000
[ "$RC" = 0 ] && cmp -s <(tail -c +3000001 "$T/big" | head -c 100000) "$T/o3" && ok "Retrieve Range at an offset" ||
	fail "Retrieve Range: $RC $OUT"
head -c 1000 /dev/urandom >"$T/small2"
run 20 "${C[@]}" store small "$T/small2" --must-exist
check "Store --must-exist replaces a value" 0 "stored small"
run 20 "${C[@]}" retrieve small "$T/o4"
[ "$RC" = 0 ] && cmp -s "$T/small2" "$T/o4" && ok "the shorter value replaced the longer one whole" || fail "after replace: $RC $OUT"
run 20 "${C[@]}" store small "$T/small2" --must-not-exist
check "Store --must-not-exist on a present key: 89h" 3 "Key Exists"
run 20 "${C[@]}" exist big
check "Exist" 0 ""
run 20 "${C[@]}" list
[ "$RC" = 0 ] && [ "$(grep -c . <<<"$OUT")" = 2 ] && grep -q '^big$' <<<"$OUT" && grep -q '^small$' <<<"$OUT" &&
	ok "List: both keys" || fail "List: $RC $OUT"
printf 'hi' >"$T/h"
run 20 "${C[@]}" store hkey "$T/h"
run 20 "${C[@]}" exec hkey 0x82 --arg 6e6b76
check "Exec of a method that reads nothing works (hello.say_hello)" 0 "^Hello, ec-nkv!$"
run 20 "${C[@]}" exec hkey 0x86
check "Exec of a method that reads the object's data: C0h" 1 "Class or Method Not Available|class or method not available"
sleep 0.5
grep -q "opcode 86h (lua.eval_json) answered C0h: pool '$EC' is erasure-coded, where the OSD refuses a method that reads the object's data or writes omap" "$T/d.log" &&
	ok "the log names the reason for that C0h" || fail "no log line for the refused method: $(tail -5 "$T/d.log")"
run 20 "${C[@]}" delete big
check "Delete" 0 ""
run 20 "${C[@]}" exist big
check "Exist after Delete: 87h" 2 ""
stop_daemon

# --- 2. a cache namespace: refused without a meta pool, working with one ---------------------------
cat >"$T/cache.json" <<EOF
{"backend": {$BACKEND_JSON}, "listeners": [{"address": "127.0.0.1", "port": $P}], "discovery": false,
 "control": {"address": "none"}, "gateway_name": "gw-ec",
 "subsystems": [{"nqn": "$NQN", "pool": "$EC",
  "namespaces": [{"nsid": 1, "rados_namespace": "$RNS-c", "cache": {"reap_interval_s": 1}}]}]}
EOF
if start_daemon "$T/cache.json"; then
	fail "a cache namespace on $EC without a meta pool started"; stop_daemon
else
	grep -q "nsid 1: pool '$EC' is erasure-coded and keeps no omap, where a cache namespace keeps its usage shares and eviction lease: set a replicated meta pool" "$T/d.log" &&
		ok "a cache namespace on the EC pool without a meta pool is refused at start, naming pool and fix" ||
		fail "refusal without the reason: $(cat "$T/d.log")"
fi
for bad in '' 'a"b' 'x\y' "$(printf 'p%.0s' $(seq 130))"; do
	run 10 "$D" -c "$T/cache.json" --meta-pool "$bad" --check
	check "--meta-pool '${bad:0:12}' is refused" 64 "invalid value for --meta-pool"
done
sed "s/\"client_id\": \"${NKV_CEPH_USER:-admin}\"/&, \"meta_pool\": \"\"/" "$T/cache.json" >"$T/bad.json"
run 10 "$D" -c "$T/bad.json" --check
check "\"meta_pool\": \"\" is refused" 1 "meta_pool.*must be a pool name"
if start_daemon "$T/cache.json" --meta-pool "$EC"; then
	fail "an erasure-coded meta pool was taken"; stop_daemon
else
	grep -q "meta pool '$EC' is erasure-coded: it must keep omap" "$T/d.log" && ok "an erasure-coded meta pool is refused" ||
		fail "EC meta pool: $(cat "$T/d.log")"
fi
if start_daemon "$T/cache.json" --meta-pool nkv-no-such-pool; then
	fail "a missing meta pool was taken"; stop_daemon
else
	grep -q "meta pool 'nkv-no-such-pool'" "$T/d.log" && ok "a missing meta pool is refused" || fail "missing meta pool: $(cat "$T/d.log")"
fi
if start_daemon "$T/cache.json" --meta-pool "$META"; then
	ok "a cache namespace on the EC pool starts with --meta-pool $META"
	run 20 "${C[@]}" store t1 "$T/small" --ttl 1
	check "Store --ttl 1 on the EC cache namespace" 0 "stored t1"
	run 20 "${C[@]}" store t2 "$T/small" --ttl none
	run 20 "${C[@]}" retrieve t1 "$T/o5"
	[ "$RC" = 0 ] && cmp -s "$T/small" "$T/o5" && ok "Retrieve before the TTL" || fail "Retrieve before the TTL: $RC $OUT"
	sleep 1.5
	run 20 "${C[@]}" retrieve t1 "$T/o6"
	check "Retrieve after the TTL: 87h" 2 "Key Does Not Exist"
	# the gateway's share is written at each tick (and at stop): wait for it in the meta pool
	share=
	for _ in $(seq 40); do
		share=$("${RADOS[@]}" -p "$META" -N "$RNS-c" listomapvals "rados_nkv.cache@$EC" 2>/dev/null | head -c 2000)
		grep -q "gw-ec" <<<"$share" && break
		sleep 0.5
	done
	grep -q "gw-ec" <<<"$share" && ok "the usage share is in the meta pool's rados_nkv.cache@$EC" ||
		fail "no share in $META/$RNS-c/rados_nkv.cache@$EC: $share $(tail -5 "$T/d.log")"
	"${RADOS[@]}" -p "$EC" -N "$RNS-c" stat rados_nkv.cache >/dev/null 2>&1 &&
		fail "a cache object in the EC pool" || ok "no cache object in the EC pool"
	grep -q "is erasure-coded and keeps no omap\|EOPNOTSUPP\|Operation not supported" "$T/d.log" &&
		fail "the cache ran into omap errors: $(grep -m3 'omap\|not supported' "$T/d.log")" || ok "no omap errors in the log"
	stop_daemon
else
	fail "the cache namespace did not start with --meta-pool: $(cat "$T/d.log")"
fi
"${RADOS[@]}" -p "$META" -N "$RNS-c" rm "rados_nkv.cache@$EC" >/dev/null 2>&1

# --- 3. group state on an erasure-coded pool: refused -----------------------------------------------
cat >"$T/group.json" <<EOF
{"backend": {$BACKEND_JSON}, "listeners": [{"address": "127.0.0.1", "port": $P}], "discovery": false,
 "control": {"address": "unix:$T/ctl.sock"}, "gateway_name": "gw-ec", "group": {"name": "$RNS", "pool": "$EC"}}
EOF
if start_daemon "$T/group.json"; then
	fail "a group on the EC pool started"; stop_daemon
else
	grep -q "group $RNS: pool '$EC' is erasure-coded and keeps no omap, where the group state lives: use a replicated --group-pool" "$T/d.log" &&
		ok "--group on an erasure-coded pool is refused at start, naming the pool" || fail "group on EC: $(cat "$T/d.log")"
fi
"${RADOS[@]}" -p "$EC" stat "rados_nkv.group.$RNS" >/dev/null 2>&1 && fail "a group object was left in the EC pool" ||
	ok "no group object in the EC pool"
echo "$PASS passed, $FAILN failed"
[ "$FAILN" = 0 ]
