#!/usr/bin/env bash
# exec_cli.sh - vendor Exec as an operator and a host use it (issue 13): allowlists in the daemon's
# JSON configuration, `nkv exec` (text, binary to a file, -o json, truncation), and SIGHUP changing
# an allowlist live; on mem every allowlisted opcode answers C0h.
#
#   bash test/func/exec_cli.sh BUILD_DIR mem|rados     # rados: the cluster of scripts/ceph-dev.sh env
#
# Every check prints "ok - ..." or "FAIL - ..."; the last line is "N passed, N failed".
set -u
NAME=exec-cli
. "$(dirname "$0")/cli_lib.sh"

# conf EXTRA_RULES: the daemon's configuration with say_hello (0x82, bound "rados-") and more rules
conf() {
	local backend='"type": "mem"'
	[ "$BACKEND" = rados ] && backend="\"type\": \"rados\", \"ceph_conf\": \"$NKV_CEPH_CONF\", \"keyring\": \"$NKV_CEPH_KEYRING\", \"client_id\": \"${NKV_CEPH_USER:-admin}\""
	cat >"$T/conf.json" <<EOF
{"backend": {$backend}, "listeners": [{"address": "127.0.0.1", "port": $P}], "discovery": false,
 "subsystems": [{"nqn": "nqn.2026-11.io.rados-nkv:exec-cli", "pool": "${NKV_CEPH_POOL:-nkv}",
  "namespaces": [{"nsid": 1, "rados_namespace": "$RNS", "exec": [$1]}]}]}
EOF
}
SAY='{"opcode": "0x82", "class": "hello", "method": "say_hello", "mode": "read", "input": "rados-"}'
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
grep -q "opcode 82h runs hello.say_hello (read, bound input 6 bytes)" "$T/d.log" && ok "the allowlist is logged" ||
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
echo "$PASS passed, $FAILN failed"
[ "$FAILN" = 0 ] && [ "$PASS" -gt 0 ]
