#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tls_cli.sh - NVMe/TCP TLS as a user configures and runs it (mem backend, no cluster): the daemon's
# JSON "tls" listeners and "tls_keys" (inline and from a file), --check, every key and listener
# error, then the nkv CLI over TLS (store/retrieve/list, discover's TREQ, refusals and their
# messages, gen-tls-key), NQNs too long for a version 0 identity, and a short throughput figure TLS vs
# plain with nkv bench (printed, not asserted).
#
#   bash test/func/tls_cli.sh BUILD_DIR      # BUILD_DIR holds rados-nkv and nkv
#
# Every check prints "ok - ..." or "FAIL - ..."; the last line is "N passed, N failed"; exit 1 on
# any failure. Every command runs under timeout; the EXIT trap kills the daemons it started.
set -u
BUILD=$(realpath "${1:?usage: $0 BUILD_DIR}")
D="$BUILD/rados-nkv"
N="$BUILD/nkv"
T=$(mktemp -d "${TMPDIR:-/tmp}/nkv-tls.XXXXXX")
PASS=0 FAILN=0 PIDS=()
NQN=nqn.2026-11.io.rados-nkv:tls-cli
HOST=nqn.2014-08.org.nvmexpress:uuid:11111111-2222-3333-4444-555555555555
HOST2=nqn.2014-08.org.nvmexpress:uuid:22222222-2222-3333-4444-555555555555

ok() { PASS=$((PASS + 1)); echo "ok - $*"; }
fail() { FAILN=$((FAILN + 1)); echo "FAIL - $*"; }
cleanup() {
	for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
	rm -rf "$T"
}
trap cleanup EXIT
run() { local s=$1; shift; OUT=$(timeout "$s" "$@" 2>&1); RC=$?; }
check() {
	if [ "$RC" = "$2" ] && grep -qE -- "$3" <<<"$OUT"; then ok "$1"; else fail "$1 (exit $RC, output: $(head -c 600 <<<"$OUT"))"; fi
}
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

echo "# keys"
run 10 "$N" gen-tls-key
check "nkv gen-tls-key prints a SHA-256 key" 0 '^NVMeTLSkey-1:01:[A-Za-z0-9+/]{48}:$'
KEY=$OUT
run 10 "$N" gen-tls-key 02
check "nkv gen-tls-key 02 prints a SHA-384 key" 0 '^NVMeTLSkey-1:02:[A-Za-z0-9+/=]{72}:$'
KEY2=$OUT
run 10 "$N" gen-tls-key
OTHER=$OUT
[ "$KEY" != "$OTHER" ] && ok "two generated keys differ" || fail "gen-tls-key repeated a key"
printf '%s\n' "$KEY2" >"$T/host2.key"
chmod 600 "$T/host2.key"
BADCRC=${KEY:0:20}$([ "${KEY:20:1}" = A ] && echo B || echo A)${KEY:21}

P=$(free_port) PT=$(free_port) PD=$(free_port)
cat >"$T/tls.json" <<EOF
{"backend": {"type": "mem"},
 "listeners": [{"address": "127.0.0.1", "port": $P}, {"address": "127.0.0.1", "port": $PT, "tls": true}],
 "discovery": {"address": "127.0.0.1", "port": $PD},
 "tcp": {"tls_handshake_timeout_ms": 3000},
 "subsystems": [{"nqn": "$NQN", "pool": "tls",
                 "tls_keys": [{"host": "$HOST", "key": "$KEY"}, {"host": "$HOST2", "key_file": "$T/host2.key"}]}]}
EOF

echo "# daemon configuration"
run 10 "$D" -c "$T/tls.json" --check
check "--check marks the TLS listener" 0 "NVMe/TCP listener: 127.0.0.1:$PT \(TLS 1.3 with a PSK required\)"
check "--check lists host 1's PSK by hash, not the key" 0 "TLS PSK of host $HOST: 32 bytes, identity NVMe0R01/NVMe1R01 \(TLS_AES_128_GCM_SHA256\)"
check "--check lists host 2's key file" 0 "TLS PSK of host $HOST2: 48 bytes, identity NVMe0R02/NVMe1R02 \(TLS_AES_256_GCM_SHA384\), from $T/host2.key"
grep -q -- "${KEY:16:20}" <<<"$OUT" && fail "--check printed key material" || ok "--check prints no key material"
run 10 "$D" -b mem -s "$NQN" --tls-key "$HOST=$BADCRC" --listen-tls "127.0.0.1:$PT" --check
check "a mistyped key is refused, naming subsystem, host and cause" 1 "subsystem $NQN: TLS key of host $HOST: the key's CRC-32 does not match"
run 10 "$D" -b mem -s "$NQN" --tls-key "$HOST=@$T/missing.key" --listen-tls "127.0.0.1:$PT" --check
check "a missing key file is refused" 1 "TLS key of host $HOST in $T/missing.key: No such file or directory"
run 10 "$D" -b mem -s "$NQN" --tls-key "$HOST=NVMeTLSkey-1:02:${KEY:16}" --check
check "hh 02 with a 32-byte key is refused" 1 "not the length its hh names"
run 10 "$D" -b mem --listen-tls "127.0.0.1:$PT" --check
check "a TLS listener without any key is refused" 1 "TLS listener 127.0.0.1:$PT but no TLS key"
run 10 "$D" -b mem -s "$NQN" --tls-key "$HOST" --check
check "--tls-key without HOSTNQN= is a usage error" 64 "invalid value for --tls-key"
run 10 "$D" -b mem -s "$NQN" --tls-key "$HOST=$KEY" --tls-key "$HOST=$OTHER" --check
check "two keys for one host and subsystem are refused" 1 "two TLS keys for host $HOST"
run 10 "$D" -b mem -s "$NQN" -a "$HOST2" --tls-key "$HOST=$KEY" --check
check "a key for a host off the allowlist is a warning" 0 "host $HOST has a TLS key but is not on the allowlist"
run 10 "$D" -b mem -l "0.0.0.0:$P" --listen-tls "0.0.0.0:$PT" -d none -s "$NQN" --tls-key "$HOST=$KEY"
check "a plain listener off loopback still needs an allowlist" 1 "would be open to any host on 0.0.0.0:$P"
run 10 "$D" -b mem --listen-tls "0.0.0.0:$PT" -d none -s "$NQN" --tls-key "$HOST=$KEY" --check
check "a TLS-only listener off loopback admits only hosts with keys: no --allow-any-host needed" 0 "listener: 0.0.0.0:$PT \(TLS"
cat >"$T/bad.json" <<EOF
{"backend": {"type": "mem"}, "subsystems": [{"nqn": "$NQN", "tls_keys": [{"host": "$HOST", "key": "$KEY", "key_file": "/x"}]}]}
EOF
run 10 "$D" -c "$T/bad.json" --check
check "key and key_file together are refused" 1 "tls_keys 0: \"host\" and one of \"key\" or \"key_file\" are required"
cat >"$T/bad2.json" <<EOF
{"backend": {"type": "mem"}, "listeners": [{"port": $PT, "tls": "yes"}]}
EOF
run 10 "$D" -c "$T/bad2.json" --check
check "a non-boolean \"tls\" is refused" 1 "\"tls\" must be a boolean"

echo "# nkv over TLS against the daemon"
"$D" -c "$T/tls.json" --log-level info 2>"$T/daemon.log" &
DPID=$!
PIDS+=("$DPID")
for _ in $(seq 100); do "$N" -a 127.0.0.1 -s "$PD" -q "$HOST" discover >/dev/null 2>&1 && break; sleep 0.1; done
C=(-a 127.0.0.1 -s "$PT" -n "$NQN" -q "$HOST" --tls --tls-key "$KEY")
head -c 3000000 /dev/urandom >"$T/value"
run 20 "$N" "${C[@]}" store big "$T/value"
check "store 3 MB over TLS" 0 "stored big \(2.9 MiB\)"
run 20 "$N" "${C[@]}" retrieve big "$T/back"
cmp -s "$T/value" "$T/back" && ok "retrieve over TLS gives the same bytes" || fail "retrieve over TLS differs ($OUT)"
run 20 "$N" -a 127.0.0.1 -s "$PT" -n "$NQN" -q "$HOST2" --tls-key "@$T/host2.key" --hdgst --ddgst retrieve big "$T/back2"
cmp -s "$T/value" "$T/back2" && ok "host 2, SHA-384 key from a file, digests: same bytes" || fail "host 2 retrieve differs ($OUT)"
run 20 "$N" "${C[@]}" --tls-identity 1 list
check "list over TLS with a version 1 identity" 0 "^big$"
run 20 "$N" -a 127.0.0.1 -s "$P" -n "$NQN" -q "$HOST" retrieve big "$T/back3"
cmp -s "$T/value" "$T/back3" && ok "the plain listener serves the same data" || fail "plain retrieve differs ($OUT)"
run 20 "$N" -a 127.0.0.1 -s "$PD" -q "$HOST" discover
OUT=$(tr '\n' '|' <<<"$OUT") # one line: each entry's treq and trsvcid together
check "discover shows TREQ required for the TLS port" 0 "treq:    required, sq flow control disable supported\|portid:  [0-9]+\|trsvcid: $PT\|"
check "discover shows TREQ not specified for the plain port" 0 "treq:    not specified, sq flow control disable supported\|portid:  [0-9]+\|trsvcid: $P\|"
run 20 "$N" -a 127.0.0.1 -s "$PT" -q "$HOST" --tls-key "$KEY" -o json discover
check "discover over TLS (-o json: treq 5 and 4)" 0 '"treq":5,.*"treq":4,'
run 20 "$N" -a 127.0.0.1 -s "$PT" -n "$NQN" -q "$HOST" retrieve big "$T/x"
check "a plain nkv on the TLS port: refused with a hint" 1 "closed the connection at once \(a TLS-only listener\? use --tls --tls-key KEY\)"
run 20 "$N" -a 127.0.0.1 -s "$P" -n "$NQN" -q "$HOST" --tls-key "$KEY" retrieve big "$T/x"
check "nkv --tls on the plain port: refused with a hint" 1 "closed the connection during the TLS handshake"
run 20 "$N" -a 127.0.0.1 -s "$PT" -n "$NQN" -q "$HOST" --tls-key "$OTHER" retrieve big "$T/x"
check "a wrong key: refused, naming host and subsystem" 1 "does not accept this PSK for host $HOST and subsystem $NQN"
[ "$(grep -c . <<<"$OUT")" = 1 ] && ok "one line for one failure (no library warning before it)" ||
	fail "a wrong key printed $(grep -c . <<<"$OUT") lines: $(head -c 600 <<<"$OUT")"
run 20 "$N" -a 127.0.0.1 -s "$PT" -n "$NQN" -q "$HOST" --tls retrieve big "$T/x"
check "--tls without --tls-key is a usage error" 64 "--tls needs --tls-key"
run 20 "$N" -a 127.0.0.1 -s "$PT" -n "$NQN" -q "$HOST" --tls-key "$BADCRC" retrieve big "$T/x"
check "a mistyped --tls-key is a usage error" 64 "bad --tls-key: the key's CRC-32 does not match"
grep -q "TLS 1.3 TLS_AES_256_GCM_SHA384, PSK identity NVMe0R02 $HOST2 $NQN" "$T/daemon.log" &&
	ok "the daemon logs host 2's session: cipher and identity" || fail "no session line for host 2 in the daemon log"

echo "# NQNs too long for a version 0 identity (255 bytes): version 1 only"
LH=nqn.2014-08.org.nvmexpress:uuid:$(printf 'a%.0s' $(seq 150))
LS=nqn.2026-11.io.rados-nkv:$(printf 's%.0s' $(seq 120))
PL=$(free_port)
"$D" -b mem --listen-tls "127.0.0.1:$PL" -d none -s "$LS" --tls-key "$LH=$KEY" --log-level info 2>"$T/long.log" &
LPID=$!
PIDS+=("$LPID")
for _ in $(seq 100); do grep -q "ready:" "$T/long.log" && break; sleep 0.1; done
grep -q "NQNs too long for a version 0 PSK identity.*only version 1 (NVMe1R0x) is accepted" "$T/long.log" &&
	ok "the daemon says only version 1 identities fit" || fail "no version 0 warning: $(tail -3 "$T/long.log")"
run 20 "$N" -a 127.0.0.1 -s "$PL" -n "$LS" -q "$LH" --tls-key "$KEY" list
check "nkv with a version 0 identity: refused before connecting, with the way out" 1 "too long together for a version 0 TLS PSK identity \(255 bytes\): use --tls-identity 1"
run 20 "$N" -a 127.0.0.1 -s "$PL" -n "$LS" -q "$LH" --tls-key "$KEY" --tls-identity 1 list
check "nkv with --tls-identity 1 connects" 0 "^$"
kill -TERM "$LPID"
wait "$LPID"

echo "# throughput, TLS vs plain (nkv bench; a figure, not a check)"
for mode in plain tls; do
	if [ $mode = tls ]; then A=(-s "$PT" --tls-key "$KEY"); else A=(-s "$P"); fi
	run 60 "$N" -a 127.0.0.1 "${A[@]}" -n "$NQN" -q "$HOST" bench qd=8 conns=2 size=1M bytes=256M time=5
	if [ "$RC" = 0 ] && grep -q "0 mismatches, 0 errors" <<<"$OUT"; then
		ok "bench over $mode: every value verified"
		awk -v m="$mode" '/^write|^read/ {printf "  %-5s %-8s %8s MB/s  p50 %s us\n", m, $2, $6, $7}' <<<"$OUT"
	else
		fail "bench over $mode (exit $RC: $(tail -c 400 <<<"$OUT"))"
	fi
done

kill -TERM "$DPID"
for _ in $(seq 100); do kill -0 "$DPID" 2>/dev/null || break; sleep 0.1; done
wait "$DPID"
RC=$?
[ "$RC" = 0 ] && ok "the daemon stops cleanly (exit 0)" || fail "daemon exit status $RC: $(tail -5 "$T/daemon.log")"
echo "$PASS passed, $FAILN failed"
[ "$FAILN" = 0 ]
