#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# cache_control.sh - cache policies in the daemon's configuration and through its control plane,
# mem backend, no cluster:
#   1. the JSON file's per-namespace "cache" object: a full policy and {} as --check prints them;
#      every kind of bad value refused (exit 1) with a message naming the file, namespace and key
#   2. (with nkv-ctl) a daemon with a state file: the file's policies in `ns list`, a live change
#      with `ns cache-policy` (by field and --replace) seen in `usage`, the errors' exit codes
#      (FAILED_PRECONDITION 5, INVALID_ARGUMENT 4, NOT_FOUND 2), a cache namespace added live,
#      and after a restart the state's policies (not the file's) running; with nkv, values stored
#      over NVMe/TCP counted in `usage`
#
#   bash test/func/cache_control.sh PATH/rados-nkv [PATH/nkv-ctl [PATH/nkv]]
#
# Every check prints "ok - ..." or "FAIL - ..."; the last line is "N passed, N failed"; exit 1 on
# any failure. Commands run under timeout; the EXIT trap kills the daemon it started.
set -u
D=${1:?usage: $0 PATH/rados-nkv [PATH/nkv-ctl]}
CTL=${2:-}
NKV=${3:-}
T=$(mktemp -d "${TMPDIR:-/tmp}/nkv-cachectl.XXXXXX")
PASS=0 FAILN=0 PID=""
NQN=nqn.2026-12.io.rados-nkv:cache-ctl
ok() { PASS=$((PASS + 1)); echo "ok - $*"; }
fail() { FAILN=$((FAILN + 1)); echo "FAIL - $*"; }
cleanup() { [ -n "$PID" ] && kill -KILL "$PID" 2>/dev/null; wait 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
run() { local s=$1; shift; OUT=$(timeout "$s" "$@" 2>&1); RC=$?; }
check() {
	if [ "$RC" = "$2" ] && grep -qE -- "$3" <<<"$OUT"; then ok "$1"; else fail "$1 (exit $RC, output: $(head -c 600 <<<"$OUT"))"; fi
}
# conf FILE NS_JSON...: a mem configuration with subsystem $NQN and these namespaces
conf() {
	local f=$1; shift
	local IFS=,
	printf '{"backend": {"type": "mem"}, "subsystems": [{"nqn": "%s", "namespaces": [%s]}]}\n' "$NQN" "$*" >"$f"
}

echo "# 1. the \"cache\" object of a namespace"
conf "$T/good.json" '{"nsid": 1, "cache": {"capacity": "64M", "capacity_keys": 1000, "pin_quota": 1048576,
  "default_ttl": 60, "max_ttl": 3600, "bytes_per_token": 131072, "eviction": "fifo", "low_watermark_pct": 80,
  "overshoot_pct": 5, "touch_interval_ms": 500, "reap_interval_s": 2, "reap_rate": 100, "lease_ms": 3000}}' \
	'{"nsid": 2, "cache": {}}' '{"nsid": 3}'
run 10 "$D" -c "$T/good.json" --check
check "a full policy: every key as parsed" 0 "nsid 1: .*
    cache: capacity 67108864 bytes, 1000 keys; pin quota 1048576 bytes; default TTL 60 s, max TTL 3600 s; bytes per token 131072; eviction fifo; low watermark 80%, overshoot 5%; touch 500 ms; reap every 2 s at 100/s; lease 3000 ms"
check "cache {}: a cache with the defaults" 0 "nsid 2: .*
    cache: capacity 0 bytes, 0 keys; .* eviction lru"
[ "$(grep -c '    cache:' <<<"$OUT")" = 2 ] && ok "no cache line for the namespace without one" || fail "cache lines: $OUT"
bad() { # bad NAME CACHE_JSON REGEX
	conf "$T/bad.json" "{\"nsid\": 1, \"cache\": $2}"
	run 10 "$D" -c "$T/bad.json" --check
	check "$1" 1 "bad\.json: subsystem $NQN: namespace 0: $3"
}
bad "an unknown key is named" '{"capacity": "1M", "colour": "red"}' 'cache: "colour" is not a known key'
bad "a size that is no size" '{"capacity": "64X"}' 'cache: "capacity" must be bytes or a size like "64M"'
bad "a negative capacity" '{"capacity": -1}' 'cache: "capacity" must be between 0 and'
bad "pin_quota as a boolean" '{"pin_quota": true}' 'cache: "pin_quota" must be bytes or a size like "64M"'
bad "an unknown eviction" '{"eviction": "random"}' 'cache: "eviction" must be "lru", "fifo" or "off"'
bad "an empty eviction" '{"eviction": ""}' 'cache: "eviction" must be "lru", "fifo" or "off"'
bad "low_watermark_pct 0" '{"low_watermark_pct": 0}' 'cache: "low_watermark_pct" must be between 1 and 99'
bad "low_watermark_pct 100" '{"low_watermark_pct": 100}' 'cache: "low_watermark_pct" must be between 1 and 99'
bad "overshoot_pct 101" '{"overshoot_pct": 101}' 'cache: "overshoot_pct" must be between 0 and 100'
bad "a TTL of FFFFFFFFh (never, on the wire)" '{"max_ttl": 4294967295}' 'cache: "max_ttl" must be between 0 and 4294967294'
bad "a default TTL above the maximum" '{"default_ttl": 100, "max_ttl": 10}' 'cache: "default_ttl" is above "max_ttl"'
bad "a TTL as a string" '{"default_ttl": "1h"}' 'cache: "default_ttl" must be an integer'
bad "reap_rate above 32 bits" '{"reap_rate": 4294967296}' 'cache: "reap_rate" must be between 0 and 4294967295'
bad "cache that is no object" '"yes"' '"cache" must be an object'

if [ -z "$CTL" ]; then
	echo "# 2. skipped: no nkv-ctl (built without grpc++)"
	echo "$PASS passed, $FAILN failed"
	[ "$FAILN" = 0 ]
	exit
fi

echo "# 2. through the control plane"
start() {
	rm -f "$T/pid"
	"$D" -c "$T/live.json" -l 127.0.0.1:0 -d none --control "unix:$T/ctl.sock" --state-file "$T/state.json" \
		--gateway-name gw-cache --pid-file "$T/pid" >"$T/d.log" 2>&1 &
	PID=$!
	for _ in $(seq 200); do [ -s "$T/pid" ] && return 0; kill -0 "$PID" 2>/dev/null || break; sleep 0.05; done
	cat "$T/d.log"
	return 1
}
stop() { kill -TERM "$PID" 2>/dev/null; wait "$PID" 2>/dev/null; PID=""; }
ctl() { timeout 20 "$CTL" --server "unix:$T/ctl.sock" "$@"; }
# jpath JSON EXPR: a python expression over the parsed JSON as j
jpath() { /usr/bin/python3 -c 'import json,sys; j=json.loads(sys.argv[1]); print(eval(sys.argv[2]))' "$1" "$2" 2>/dev/null; }

conf "$T/live.json" '{"nsid": 1, "rados_namespace": "c1", "cache": {"capacity": "64M", "eviction": "fifo", "default_ttl": 60}}' \
	'{"nsid": 2, "rados_namespace": "plain"}'
start && ok "the daemon starts with a cache namespace from its file" || fail "the daemon did not start"
OUT=$(ctl -o json ns list "$NQN"); RC=$?
[ "$RC" = 0 ] && [ "$(jpath "$OUT" 'j["namespaces"][0]["cache"]["capacity_bytes"], j["namespaces"][0]["cache"]["eviction"], j["namespaces"][0]["cache"]["default_ttl_s"], "cache" in j["namespaces"][1]')" = "('67108864', 'fifo', 60, False)" ] &&
	ok "ns list: the file's policy on NSID 1, no cache on NSID 2" || fail "ns list: $RC $OUT"
run 20 "$CTL" --server "unix:$T/ctl.sock" ns cache-policy "$NQN" 1 --capacity 128M --reap-rate 500
check "ns cache-policy by field" 0 "capacity        128 MiB, no key limit"
check "  the other fields kept" 0 "eviction        fifo"
check "  and the new one shown" 0 "reap rate       500/s"
OUT=$(ctl -o json usage "$NQN" 1); RC=$?
[ "$RC" = 0 ] && [ "$(jpath "$OUT" 'j["namespaces"][0]["policy"]["capacity_bytes"], j["namespaces"][0]["policy"]["reap_rate"], j["namespaces"][0]["policy"]["eviction"], j["namespaces"][0]["capacity_bytes"], j["namespaces"][0]["gateway"]')" = "('134217728', 500, 'fifo', '134217728', 'gw-cache')" ] &&
	ok "usage: the target runs the new policy (answered by gw-cache)" || fail "usage: $RC $OUT"
run 20 "$CTL" --server "unix:$T/ctl.sock" usage "$NQN" 1
check "usage for people" 0 "used            0 \(0 bytes\) of 128 MiB"
if [ -n "$NKV" ]; then
	PORT=$(grep -o 'NVMe/TCP on 127\.0\.0\.1:[0-9]*' "$T/d.log" | tail -1 | sed 's/.*://')
	head -c 100000 /dev/urandom >"$T/v"
	run 20 "$NKV" -s "$PORT" -n "$NQN" --nsid 1 store k1 "$T/v"
	check "a Store over NVMe/TCP on the cache namespace" 0 ""
	run 20 "$NKV" -s "$PORT" -n "$NQN" --nsid 1 store k2 "$T/v"
	OUT=$(ctl -o json usage "$NQN" 1); RC=$?
	[ "$RC" = 0 ] && [ "$(jpath "$OUT" 'j["namespaces"][0]["keys"], int(j["namespaces"][0]["used_bytes"]) >= 200000, j["namespaces"][0]["pinned_keys"]')" = "('2', True, '0')" ] &&
		ok "usage counts the 2 values stored (>= 200000 bytes, no pins)" || fail "usage after 2 Stores: $RC $OUT"
	run 20 "$CTL" --server "unix:$T/ctl.sock" usage "$NQN" 1
	check "usage for people after them" 0 "keys            2 \(no key limit\)"
fi
run 20 "$CTL" --server "unix:$T/ctl.sock" ns cache-policy "$NQN" 2 --capacity 1M
check "ns cache-policy on a namespace without a cache: FAILED_PRECONDITION (5)" 5 "has no cache.*FAILED_PRECONDITION"
run 20 "$CTL" --server "unix:$T/ctl.sock" ns cache-policy "$NQN" 9 --capacity 1M
check "ns cache-policy on no namespace: NOT_FOUND (2)" 2 "no namespace 9"
run 20 "$CTL" --server "unix:$T/ctl.sock" ns cache-policy "$NQN" 1 --max-ttl 10
check "a max TTL below the default TTL (60): INVALID_ARGUMENT (4)" 4 "default_ttl_s 60 is above max_ttl_s 10"
run 20 "$CTL" --server "unix:$T/ctl.sock" usage "$NQN" 2
check "usage of a namespace without a cache: FAILED_PRECONDITION (5)" 5 "has no cache"
run 20 "$CTL" --server "unix:$T/ctl.sock" namespace add "$NQN" --nsid 3 --rados-ns c3 --cache --default-ttl 30 --pin-quota 1M
check "namespace add --cache live" 0 "cache           yes.*"
run 20 "$CTL" --server "unix:$T/ctl.sock" usage "$NQN"
check "usage of the subsystem: both caches" 0 "^1 .*128 MiB.*
3 .*no limit"
run 20 "$CTL" --server "unix:$T/ctl.sock" ns cache-policy "$NQN" 3 --replace --eviction off
check "ns cache-policy --replace: the rest back to defaults" 0 "default ttl     never expire"
check "  pin quota gone too" 0 "pin quota       no quota"
stop
# The file still says 64M; the state file says 128M: the state wins.
start && ok "restarted with the same file and state" || fail "restart"
OUT=$(ctl -o json ns list "$NQN"); RC=$?
[ "$RC" = 0 ] && [ "$(jpath "$OUT" '[(n["nsid"], n.get("cache", {}).get("capacity_bytes"), n.get("cache", {}).get("eviction")) for n in j["namespaces"]]')" = "[(1, '134217728', 'fifo'), (2, None, None), (3, '0', 'off')]" ] &&
	ok "after the restart: the state's policies, not the file's" || fail "ns list after restart: $RC $OUT"
OUT=$(ctl -o json usage "$NQN"); RC=$?
[ "$RC" = 0 ] && [ "$(jpath "$OUT" '[(u["nsid"], u["policy"]["capacity_bytes"], u["policy"]["eviction"], u["policy"]["reap_rate"]) for u in j["namespaces"]]')" = "[(1, '134217728', 'fifo', 500), (3, '0', 'off', 2000)]" ] &&
	ok "and the restarted target runs them (usage: the policy run, defaults filled in)" || fail "usage after restart: $RC $OUT"
stop
echo "$PASS passed, $FAILN failed"
[ "$FAILN" = 0 ]
