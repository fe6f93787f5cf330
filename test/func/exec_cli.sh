#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# exec_cli.sh - vendor Exec as an operator and a host use it (issue 13): allowlists in the daemon's
# JSON configuration, `nkv exec` (text, binary to a file, -o json, truncation), and SIGHUP changing
# an allowlist live; on mem every allowlisted opcode answers C0h. Then what hosts must not do: bind
# code they complete (a raw cls_lua prefix is refused; a bound Lua script gets the host's input as
# data), write through a read-only namespace (a writer method declared "read"), or grow the daemon
# by making it reload (50 SIGHUPs with a 4 MiB bound input, Exec commands running meanwhile).
#
#   bash test/func/exec_cli.sh BUILD_DIR mem|rados     # rados: the cluster of scripts/ceph-dev.sh env
#
# Every check prints "ok - ..." or "FAIL - ..."; the last line is "N passed, N failed".
set -u
NAME=exec-cli
. "$(dirname "$0")/cli_lib.sh"

# conf RULES [RO_RULES]: the daemon's configuration: namespace 1 with RULES; with RO_RULES, also a
# read-only namespace 2 on the same RADOS namespace
conf() {
	local ro=""
	[ $# -gt 1 ] && ro=", {\"nsid\": 2, \"rados_namespace\": \"$RNS\", \"read_only\": true, \"exec\": [$2]}"
	local backend='"type": "mem"'
	[ "$BACKEND" = rados ] && backend="\"type\": \"rados\", \"ceph_conf\": \"$NKV_CEPH_CONF\", \"keyring\": \"$NKV_CEPH_KEYRING\", \"client_id\": \"${NKV_CEPH_USER:-admin}\""
	cat >"$T/conf.json" <<EOF
{"backend": {$backend}, "listeners": [{"address": "127.0.0.1", "port": $P}], "discovery": false, "control": {"address": "none"},
 "subsystems": [{"nqn": "nqn.2026-11.io.rados-nkv:exec-cli", "pool": "${NKV_CEPH_POOL:-nkv}",
  "namespaces": [{"nsid": 1, "rados_namespace": "$RNS", "exec": [$1]}$ro]}]}
EOF
}
SAY='{"opcode": "0x82", "class": "hello", "method": "say_hello", "mode": "read", "input": "rados-", "append_host_input": true}'
REPLAY='{"opcode": "0x86", "class": "hello", "method": "replay", "mode": "read"}'
# 0xf0-0xff are rados-nkv's built-in vendor commands (0xf2: Retrieve Range): no allowlist may name one.
for o in '"0xf2"' 240 '"ffh"'; do
	conf "$SAY, {\"opcode\": $o, \"class\": \"hello\", \"method\": \"say_hello\", \"mode\": \"read\"}"
	run 20 "$D" -c "$T/conf.json" --check
	check "an allowlist naming opcode $o is refused (a built-in vendor opcode)" 1 \
		"exec 1: \"opcode\" 0x(f2|f0|ff) is reserved: 0xf0-0xff are rados-nkv's built-in vendor commands"
done
conf "$SAY, $REPLAY"
"$D" -c "$T/conf.json" --pid-file "$T/pid" 2>"$T/d.log" &
DPID=$!
for _ in $(seq 150); do [ "$(cat "$T/pid" 2>/dev/null)" = "$DPID" ] && break; sleep 0.1; done
[ "$(cat "$T/pid" 2>/dev/null)" = "$DPID" ] || { cat "$T/d.log"; echo "FAIL - daemon did not start"; exit 1; }
grep -q "opcode 82h runs hello.say_hello (read, bound input 6 bytes; the host's input appended)" "$T/d.log" && ok "the allowlist is logged" ||
	fail "no allowlist line: $(cat "$T/d.log")"
C=("$N" -s "$P" -n nqn.2026-11.io.rados-nkv:exec-cli)
printf 'hi' >"$T/v"
run 20 "${C[@]}" store hkey "$T/v"
check "store the key the read methods run on" 0 "stored hkey"

if [ "$BACKEND" = rados ]; then
	run 20 "${C[@]}" exec hkey 0x82 --arg 6e6b76
	check "nkv exec 0x82 --arg 'nkv' prints the method's output" 0 "^Hello, rados-nkv!$"
	run 20 "${C[@]}" -o json exec hkey 0x82 --arg 6e6b76
	if [ "$RC" = 0 ] && /usr/bin/python3 -c 'import json,sys; j=json.loads(sys.stdin.read()); assert j["output_size"] == 17 and j["output_text"] == "Hello, rados-nkv!"' <<<"$OUT"; then
		ok "-o json: one object with output_size 17 and the text"
	else
		fail "-o json: $OUT"
	fi
	run 20 "${C[@]}" exec hkey 0x82 --arg 6e6b76 --size 5 --out "$T/o"
	[ "$RC" = 0 ] && [ "$(cat "$T/o")" = Hello ] && grep -q "only the first 5 bytes returned" <<<"$OUT" && ok "--size 5: 'Hello' in the file and a truncation warning" ||
		fail "truncation (exit $RC, file '$(cat "$T/o" 2>/dev/null)', $OUT)"
	run 20 "${C[@]}" exec nokey 0x86
	check "replay of an absent key: exit 2 (not found) naming 87h" 2 "Key Does Not Exist"
else
	run 20 "${C[@]}" exec hkey 0x82 --arg 6e6b76
	check "mem: an allowlisted opcode names C0h" 1 "class or method not available on the OSD"
fi
run 20 "${C[@]}" exec hkey 0x9a
check "an opcode not allowlisted: Invalid Command Opcode" 1 "Invalid Command Opcode"
run 20 "${C[@]}" exec hkey 0xf2
check "nkv exec 0xf2 (a built-in vendor opcode) is bad usage" 64 "0xf2 is a built-in vendor command"

# SIGHUP: drop 0x82 from the allowlist, then bring it back.
conf "$REPLAY"
kill -HUP "$DPID"; sleep 1
run 20 "${C[@]}" exec hkey 0x82 --arg 6e6b76
check "after SIGHUP without 0x82: Invalid Command Opcode" 1 "Invalid Command Opcode"
conf "$SAY, $REPLAY"
kill -HUP "$DPID"; sleep 1
run 20 "${C[@]}" exec hkey 0x82 --arg 6e6b76
if [ "$BACKEND" = rados ]; then
	check "after SIGHUP with 0x82 again: it runs" 0 "^Hello, rados-nkv!$"
else
	check "after SIGHUP with 0x82 again: allowlisted (C0h on mem)" 1 "class or method not available on the OSD"
fi
conf "$REPLAY, {\"opcode\": \"0xf2\", \"class\": \"hello\", \"method\": \"say_hello\", \"mode\": \"read\"}"
kill -HUP "$DPID"; sleep 1
run 20 "${C[@]}" exec hkey 0x82 --arg 6e6b76
if [ "$BACKEND" = rados ]; then
	check "SIGHUP with 0xf2 in the allowlist: refused, 0x82 still runs" 0 "^Hello, rados-nkv!$"
else
	check "SIGHUP with 0xf2 in the allowlist: refused, 0x82 still allowlisted (C0h on mem)" 1 "not available on the OSD"
fi
grep -q '"opcode" 0xf2 is reserved' "$T/d.log" && ok "the refused reload is logged" || fail "no reload error: $(tail -3 "$T/d.log")"
printf '{"broken' >>"$T/conf.json"
kill -HUP "$DPID"; sleep 1
run 20 "${C[@]}" exec hkey 0x86
[ "$BACKEND" = rados ] && want=0 || want=1
[ "$RC" = "$want" ] && ok "a broken file on SIGHUP keeps the running allowlist" || fail "broken-file SIGHUP (exit $RC: $OUT)"
kill -TERM "$DPID"; wait "$DPID"; rc=$?; DPID=
[ "$rc" = 0 ] && ok "the daemon stops cleanly" || fail "daemon exit $rc: $(tail -5 "$T/d.log")"

# ---- What hosts must not do ----
# Choose the code: a raw eval_json prefix left open at "input" would let the host close the string
# and name its own script and handler (cls_lua keeps the last duplicate key).
printf '{"script": "function r(i, o) end objclass.register(r)", "handler": "r", "input": "' >"$T/prefix.json"
conf "$REPLAY, {\"opcode\": \"0x99\", \"class\": \"lua\", \"method\": \"eval_json\", \"mode\": \"read\", \"input_file\": \"$T/prefix.json\", \"max_input\": 65536}"
run 20 "$D" -c "$T/conf.json" --check
check "a rule binding an open eval_json prefix is refused" 1 '"opcode" 0x99 binds raw input for lua, which runs its input as code'
conf "$REPLAY, {\"opcode\": \"0x8a\", \"class\": \"lua\", \"method\": \"eval_json\", \"mode\": \"read\"}"
run 20 "$D" -c "$T/conf.json" --check
check "a lua rule without a bound script (the host's input would be the code) is refused" 1 \
	'"opcode" 0x8a runs lua without a bound script and handler'
conf '{"opcode": "0x85", "class": "hello", "method": "say_hello", "mode": "read", "input": "rados-"}'
run 20 "$D" -c "$T/conf.json" --check
check "bound input plus the host's (01b) without append_host_input is refused" 1 'declare append_host_input'
printf 'x\0y' >"$T/nul.lua"
conf "{\"opcode\": \"0x8d\", \"class\": \"lua\", \"method\": \"eval_json\", \"mode\": \"write\", \"script_file\": \"$T/nul.lua\", \"handler\": \"put\"}"
run 20 "$D" -c "$T/conf.json" --check
check "a script file with a NUL byte is refused" 1 '"script_file" contains a NUL byte'
# A Lua rule done right: the script is bound; the host's input is what it stores.
printf 'function put(input, output)\n  objclass.write_full(input)\nend\nobjclass.register(put)\n' >"$T/put.lua"
PUT="{\"opcode\": \"0x8d\", \"class\": \"lua\", \"method\": \"eval_json\", \"mode\": \"write\", \"create\": true, \"script_file\": \"$T/put.lua\", \"handler\": \"put\"}"
conf "$PUT"
run 20 "$D" -c "$T/conf.json" --check
check "--check shows a Lua rule's script and handler" 0 'exec 8dh: lua.eval_json \(write, may create, script 84 bytes, handler put'

# Write through a read-only namespace: numops.add declared "read" (RADOS flags it a writer), and
# grow the daemon by reloading it: a 4 MiB bound input, two versions swapped on every SIGHUP.
ADD_R='{"opcode": "0x88", "class": "numops", "method": "add", "mode": "read", "input_hex": "010000006e0100000031"}'
head -c 4194304 /dev/zero | tr '\0' a >"$T/big.a"
head -c 4194304 /dev/zero | tr '\0' b >"$T/big.b"
big() { echo "{\"opcode\": \"0x84\", \"class\": \"hello\", \"method\": \"say_hello\", \"mode\": \"read\", \"input_file\": \"$T/big.$1\"}"; }
conf "$REPLAY, $ADD_R, $PUT, $(big a)" "$ADD_R"
# ASan keeps freed memory in a quarantine (256 MiB by default): keep it small so that RSS shows frees.
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=8" "$D" -c "$T/conf.json" --pid-file "$T/pid2" 2>"$T/d2.log" &
DPID=$!
for _ in $(seq 150); do [ "$(cat "$T/pid2" 2>/dev/null)" = "$DPID" ] && break; sleep 0.1; done
[ "$(cat "$T/pid2" 2>/dev/null)" = "$DPID" ] || { cat "$T/d2.log"; echo "FAIL - daemon did not start"; exit 1; }
run 20 "${C[@]}" store ro-obj "$T/v"
check "store the key for the read-only namespace" 0 "stored ro-obj"
if [ "$BACKEND" = rados ]; then
	run 20 "${C[@]}" --nsid 2 exec ro-obj 0x88
	check "numops.add declared read on the read-only namespace: refused" 1 "Write Protected"
	rm -f "$T/omap"
	run 20 rados -c "$NKV_CEPH_CONF" --keyring "$NKV_CEPH_KEYRING" -p "${NKV_CEPH_POOL:-nkv}" -N "$RNS" \
		getomapval 726f2d6f626a n "$T/omap"
	[ ! -s "$T/omap" ] && ok "and the object's omap is unchanged (no 'n')" || fail "omap n = '$(cat "$T/omap")'"
	run 20 "${C[@]}" exec ro-obj 0x88
	check "the same rule on the writable namespace runs" 0 ""
	printf 'x", "script": "function e(i, o) objclass.write_full(i) end objclass.register(e)", "handler": "e"}' >"$T/payload"
	run 20 "${C[@]}" exec lua-put 0x8d --in "$T/payload"
	check "a payload naming another script, through the bound Lua script" 0 ""
	run 20 "${C[@]}" retrieve lua-put "$T/back"
	cmp -s "$T/payload" "$T/back" && ok "is stored verbatim: the script got it as data" || fail "stored: $(head -c 80 "$T/back")"
else
	run 20 "${C[@]}" --nsid 2 exec ro-obj 0x88
	check "mem: numops.add on the read-only namespace: C0h (no classes)" 1 "not available on the OSD"
fi

rss() { awk '/^VmRSS/ {print $2}' "/proc/$DPID/status"; }
replaced() { grep -c "Exec allowlist replaced" "$T/d2.log"; }
# hup VERSION: reload with the 4 MiB input VERSION; wait until it is applied (or a while)
hup() {
	local before; before=$(replaced)
	conf "$REPLAY, $ADD_R, $PUT, $(big "$1")" "$ADD_R"
	kill -HUP "$DPID"
	for _ in $(seq 100); do [ "$(replaced)" -gt "$before" ] && return 0; sleep 0.05; done
	return 1
}
( while :; do "${C[@]}" exec hkey 0x86 >/dev/null 2>&1; "${C[@]}" --nsid 2 exec ro-obj 0x88 >/dev/null 2>&1; done ) &
LOAD=$!
hup b; hup a
rss0=$(rss)
applied=0
for i in $(seq 50); do
	if [ $((i % 2)) = 1 ]; then hup b; else hup a; fi && applied=$((applied + 1))
done
rss1=$(rss)
kill "$LOAD"; wait "$LOAD" 2>/dev/null
[ "$applied" = 50 ] && ok "50 SIGHUPs each replaced the allowlists" || fail "only $applied of 50 reloads applied"
# Each reload reads and copies 4 MiB per namespace; freed, RSS stays within a few copies of it.
[ $((rss1 - rss0)) -lt 49152 ] && ok "RSS after 50 reloads: $((rss0 / 1024)) -> $((rss1 / 1024)) MiB (bounded)" ||
	fail "RSS grew $((rss0 / 1024)) -> $((rss1 / 1024)) MiB over 50 reloads"
before=$(replaced)
kill -HUP "$DPID"; sleep 1
[ "$(replaced)" = "$before" ] && ok "a reload with an unchanged file replaces nothing" || fail "unchanged reload replaced"
run 20 "${C[@]}" exec hkey 0x86
[ "$BACKEND" = rados ] && want=0 || want=1
[ "$RC" = "$want" ] && ok "the daemon serves Exec after the reloads" || fail "exec after reloads (exit $RC: $OUT)"
kill -TERM "$DPID"; wait "$DPID"; rc=$?; DPID=
[ "$rc" = 0 ] && ok "the daemon stops cleanly (no sanitizer report)" || fail "daemon exit $rc: $(tail -20 "$T/d2.log")"
! grep -q "Sanitizer" "$T/d2.log" && ok "no sanitizer report in the log" || fail "$(grep -A20 Sanitizer "$T/d2.log" | head -40)"
echo "$PASS passed, $FAILN failed"
[ "$FAILN" = 0 ] && [ "$PASS" -gt 0 ]
