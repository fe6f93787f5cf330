#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# cache_cli.sh - `nkv store --ttl/--pin` (Store TTL, F1h) against a rados-nkv daemon whose JSON
# configuration gives namespaces a "cache": a TTL'd value is there before it expires and gone (exit 2,
# 87h) after; a pin past the pin quota says "pin quota exceeded"; a pin without a finite TTL and
# --ttl on a namespace without a cache fail with messages naming the cause; the TTL printed (and in
# -o json) is the one the target applied, cut by a namespace's max_ttl, and a pin with --ttl none is
# refused there too;
# bad --ttl values are usage errors; `nkv --ttl N bench` stores with F1h.
#
#   bash test/func/cache_cli.sh BUILD_DIR mem|rados     # rados: the cluster of scripts/ceph-dev.sh env
#
# Every check prints "ok - ..." or "FAIL - ..."; the last line is "N passed, N failed".
set -u
NAME=cache-cli
. "$(dirname "$0")/cli_lib.sh"
NQN=nqn.2026-11.io.rados-nkv:cache-cli

backend='"type": "mem"'
[ "$BACKEND" = rados ] && backend="\"type\": \"rados\", \"ceph_conf\": \"$NKV_CEPH_CONF\", \"keyring\": \"$NKV_CEPH_KEYRING\", \"client_id\": \"${NKV_CEPH_USER:-admin}\""
# nsid 1: no cache; 2: a cache with no limits and no default TTL; 3: a 100-byte pin quota, default TTL 60 s;
# 4: a maximum TTL of 86400 s
cat >"$T/conf.json" <<EOF
{"backend": {$backend}, "listeners": [{"address": "127.0.0.1", "port": $P}], "discovery": false,
 "subsystems": [{"nqn": "$NQN", "pool": "${NKV_CEPH_POOL:-nkv}",
  "namespaces": [{"nsid": 1, "rados_namespace": "$RNS-plain"},
                 {"nsid": 2, "rados_namespace": "$RNS-cache", "cache": {}},
                 {"nsid": 3, "rados_namespace": "$RNS-quota", "cache": {"pin_quota": 100, "default_ttl": 60}},
                 {"nsid": 4, "rados_namespace": "$RNS-max", "cache": {"max_ttl": 86400}}]}]}
EOF
"$D" -c "$T/conf.json" --pid-file "$T/pid" 2>"$T/d.log" &
DPID=$!
for _ in $(seq 150); do [ "$(cat "$T/pid" 2>/dev/null)" = "$DPID" ] && break; sleep 0.1; done
[ "$(cat "$T/pid" 2>/dev/null)" = "$DPID" ] || { cat "$T/d.log"; echo "FAIL - daemon did not start"; echo "0 passed, 1 failed"; exit 1; }
C=("$N" -s "$P" -n "$NQN")
printf 'short-lived' >"$T/v"
head -c 60 /dev/zero | tr '\0' p >"$T/p60"

# usage errors: nothing is sent
for bad in abc -1 4294967295 1.5 ""; do
	run 20 "${C[@]}" --nsid 2 store k "$T/v" --ttl "$bad"
	check "--ttl '$bad' is bad usage" 64 "bad --ttl '$bad' \(seconds, 0 to 4294967294"
done
run 20 "${C[@]}" --nsid 2 retrieve k --ttl 5
check "--ttl on retrieve is bad usage" 64 "--ttl and --pin are for store"
run 20 "${C[@]}" --nsid 2 delete k --pin
check "--pin on delete is bad usage" 64 "--ttl and --pin are for store"

# a TTL'd value: there before it expires, 87h after
run 20 "${C[@]}" --nsid 2 store tkey "$T/v" --ttl 2
check "store --ttl 2 on a cache namespace" 0 "stored tkey \(11 bytes, TTL 2 s\)"
run 20 "${C[@]}" --nsid 2 retrieve tkey
check "retrieve before the TTL: the value" 0 "^short-lived$"
run 20 "${C[@]}" --nsid 2 exist tkey
check "exist before the TTL" 0 ""
sleep 3.2
run 20 "${C[@]}" --nsid 2 retrieve tkey
check "retrieve after the TTL: key not found (exit 2)" 2 "Key Does Not Exist"
run 20 "${C[@]}" --nsid 2 exist tkey
check "exist after the TTL: exit 2" 2 ""
run 20 "${C[@]}" --nsid 2 store nkey "$T/v" --ttl none
check "store --ttl none" 0 "stored nkey \(11 bytes, no expiry\)"
run 20 "${C[@]}" --nsid 2 store plain "$T/v"
check "a plain store on a cache namespace" 0 "stored plain \(11 bytes\)$"

# pins
run 20 "${C[@]}" --nsid 2 store pkey "$T/v" --pin
check "--pin without --ttl where the namespace has no default TTL" 1 "no default TTL for a pin: give --ttl SECONDS"
run 20 "${C[@]}" --nsid 2 store pkey "$T/v" --pin --ttl none
check "--pin --ttl none: a pin needs a finite TTL" 1 "a pin needs a finite TTL"
run 20 "${C[@]}" --nsid 2 exist pkey
check "the refused pins stored nothing" 2 ""
run 20 "${C[@]}" --nsid 3 store p1 "$T/p60" --pin
check "--pin with the namespace's default TTL: the TTL applied" 0 "stored p1 \(60 bytes, TTL 60 s \(the namespace's default\), pinned\)"
run 20 "${C[@]}" --nsid 3 -o json store p2 "$T/p60" --pin --ttl 30
check "a second 60-byte pin past the 100-byte quota" 1 '"status":.*Capacity Exceeded'
run 20 "${C[@]}" --nsid 3 store p2 "$T/p60" --pin --ttl 30
check "... says pin quota exceeded" 1 "pin quota exceeded"
run 20 "${C[@]}" --nsid 3 exist p2
check "... and did not store the value" 2 ""
run 20 "${C[@]}" --nsid 3 -o json store p3 "$T/v" --ttl 10
if [ "$RC" = 0 ] && /usr/bin/python3 -c 'import json,sys; j=json.loads(sys.stdin.read()); assert j["command"] == "store" and j["bytes"] == 11 and j["ttl"] == 10 and j["pinned"] is False' <<<"$OUT"; then
	ok "-o json: ttl 10, pinned false"
else
	fail "-o json store --ttl 10: exit $RC, $OUT"
fi
run 20 "${C[@]}" --nsid 2 -o json store p4 "$T/v" --ttl none
/usr/bin/python3 -c 'import json,sys; j=json.loads(sys.stdin.read()); assert j["ttl"] is None' <<<"$OUT" 2>/dev/null &&
	ok "-o json: --ttl none is ttl null" || fail "-o json --ttl none: exit $RC, $OUT"

# a maximum TTL: what is printed is what the target applied; a pin never "never"
run 20 "${C[@]}" --nsid 4 store m1 "$T/v" --ttl 999999
check "--ttl 999999 under max_ttl 86400: reported as cut" 0 "stored m1 \(11 bytes, TTL 86400 s \(not 999999 s: cut by the namespace's max_ttl\)\)"
run 20 "${C[@]}" --nsid 4 store m2 "$T/v" --ttl none
check "--ttl none under max_ttl: reported as cut" 0 "stored m2 \(11 bytes, TTL 86400 s \(not none: cut by the namespace's max_ttl\)\)"
run 20 "${C[@]}" --nsid 4 store m3 "$T/v" --ttl 60
check "--ttl 60 under max_ttl: as asked" 0 "stored m3 \(11 bytes, TTL 60 s\)$"
run 20 "${C[@]}" --nsid 4 store m4 "$T/v" --ttl none --pin
check "--ttl none --pin under max_ttl: refused as everywhere" 1 "a pin needs a finite TTL"
run 20 "${C[@]}" --nsid 4 exist m4
check "... nothing stored" 2 ""
run 20 "${C[@]}" --nsid 4 -o json store m5 "$T/v" --ttl 999999 --pin
if [ "$RC" = 0 ] && /usr/bin/python3 -c 'import json,sys; j=json.loads(sys.stdin.read()); assert j["ttl"] == 86400 and j["ttl_requested"] == 999999 and j["ttl_cut"] is True and j["pinned"] is True' <<<"$OUT"; then
	ok "-o json --ttl 999999 --pin: ttl 86400, ttl_requested 999999, ttl_cut"
else
	fail "-o json store --ttl 999999 --pin under max_ttl: exit $RC, $OUT"
fi

# no cache on the namespace
run 20 "${C[@]}" --nsid 1 store k "$T/v" --ttl 5
check "--ttl on a namespace without a cache" 1 "namespace 1 has no cache: --ttl needs a cache namespace"
run 20 "${C[@]}" --nsid 1 store k "$T/v" --ttl 5 --pin
check "--pin on a namespace without a cache" 1 "namespace 1 has no cache"
run 20 "${C[@]}" --nsid 1 exist k
check "... nothing stored" 2 ""

# bench with --ttl: every Store is F1h (a namespace without a cache fails them all)
run 60 "${C[@]}" --nsid 2 --ttl 600 bench time=1 keys=16 size=1K qd=4
check "nkv --ttl 600 bench on a cache namespace" 0 ""
run 60 "${C[@]}" --nsid 1 --ttl 600 bench time=1 keys=16 size=1K qd=4
[ "$RC" = 1 ] && ok "nkv --ttl 600 bench on a namespace without a cache fails" || fail "bench --ttl on nsid 1: exit $RC: $(tail -3 <<<"$OUT")"

kill -TERM "$DPID"; wait "$DPID"; rc=$?; DPID=
[ "$rc" = 0 ] && ok "the daemon stops cleanly" || fail "daemon exit $rc: $(tail -5 "$T/d.log")"
echo "$PASS passed, $FAILN failed"
[ "$FAILN" = 0 ] && [ "$PASS" -gt 0 ]
