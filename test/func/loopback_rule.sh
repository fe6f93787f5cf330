#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# loopback_rule.sh - a subsystem that admits any host only because nobody named its hosts (no
# --allow-host, no --allow-any-host) is never served to the network, whichever way a listener off
# loopback comes (src/common/exposure.h), mem backend, no cluster:
#   1. at startup and with --check: a plain listener off loopback is refused; the discovery listener
#      serves discovery only, so it does not count, and an I/O Connect through it is refused;
#   2. live: `nkv-ctl listener add` of 0.0.0.0 or of a local address off loopback is refused
#      (FAILED_PRECONDITION, exit 5), nothing is committed and nothing listens;
#   3. live: `host allow` on the default subsystem makes it an allowlist; on an --allow-any-host one
#      it is refused; `host disallow NQN '*'` closes it, `host allow NQN '*'` opens it again;
#   4. a stored state (--state-file) applied by a daemon with a listener off loopback: the
#      subsystem stored without an allowlist is not served there (Connect refused, error logged);
#      --check says that a stored state exists and wins, and shows it;
#   5. `listener add --tls` on a daemon without TLS keys is refused before anything is committed.
#   loopback_rule.sh PATH/rados-nkv PATH/nkv-ctl PATH/nkv
# A listener on 0.0.0.0 is off loopback and still reachable through 127.0.0.1, so no extra address
# is needed; as root the test also adds 198.18.A.B/32 to lo for one check (required where
# NKV_REQUIRE_ROOT=1 or NKV_REQUIRE_RADOS=1, as in CI).
set -u
D=$1 CTL=$2 NKV=$3
pass=0 fail=0
ok() { echo "ok - $*"; pass=$((pass + 1)); }
bad() { echo "FAIL - $*"; fail=$((fail + 1)); }
check() { local what=$1; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }
T=$(mktemp -d "${TMPDIR:-/tmp}/nkv-lbrule.XXXXXX")
NQN=nqn.2026-12.io.rados-nkv:lb-$$
OPEN=nqn.2026-12.io.rados-nkv:lb-open-$$
ALLOWED=nqn.2026-12.io.test:lb-allowed
STRANGER=nqn.2026-12.io.test:lb-stranger
EXTRA=""
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
	wait 2>/dev/null
	[ -n "$EXTRA" ] && ip addr del "$EXTRA/32" dev lo 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# start NAME ARGS...: a mem daemon, gRPC on $T/NAME.sock, log $T/NAME.log; waits for its pid file
start() {
	local n=$1; shift
	rm -f "$T/$n.pid"
	"$D" -b mem --control "unix:$T/$n.sock" --pid-file "$T/$n.pid" "$@" >"$T/$n.log" 2>&1 &
	PIDS+=($!)
	for _ in $(seq 200); do [ -s "$T/$n.pid" ] && return 0; kill -0 $! 2>/dev/null || return 1; sleep 0.05; done
	return 1
}
stop() { local p; p=$(cat "$T/$1.pid" 2>/dev/null) && kill -TERM "$p" 2>/dev/null && while kill -0 "$p" 2>/dev/null; do sleep 0.05; done; }
ctl() { local n=$1; shift; timeout 20 "$CTL" --server "unix:$T/$n.sock" "$@"; }
# as HOSTNQN PORT ARGS...: nkv against 127.0.0.1:PORT, subsystem $NQN unless -n follows
as() { local q=$1 p=$2; shift 2; timeout 20 "$NKV" --timeout 3000 -q "$q" -a 127.0.0.1 -s "$p" -n "$NQN" "$@"; }
# refused CMD...: fails, and says it was refused (not served there) rather than e.g. a missing key
refused() { ! "$@" >"$T/out" 2>&1 && grep -qiE 'refused|has no subsystem' "$T/out"; }
echo v >"$T/v"

# 1. Startup and --check.
P=$(free_port)
out=$("$D" -b mem -s "$NQN" -l "0.0.0.0:$P" --control none --check 2>&1); rc=$?
check "--check refuses a plain listener on 0.0.0.0 for a subsystem without hosts ($rc)" \
	bash -c "[ $rc = 1 ] && grep -q 'would be open to any host' <<<'$out'"
DP=$(free_port)
out=$("$D" -b mem -s "$NQN" -l 127.0.0.1:0 -d "0.0.0.0:$DP" --control none --check 2>&1); rc=$?
check "--check: a discovery listener on 0.0.0.0 serves discovery only and does not count ($rc)" \
	bash -c "[ $rc = 0 ] && grep -q 'discovery: 0.0.0.0:$DP (discovery only)' <<<'$out'"
check "daemon d1: loopback listener, discovery on 127.0.0.1, no hosts" start d1 -s "$NQN" -l 127.0.0.1:0 -d "127.0.0.1:$DP"
PORT=$(grep -o 'NVMe/TCP on 127\.0\.0\.1:[0-9]*' "$T/d1.log" | head -1 | sed 's/.*://')
check "any host may use it on loopback" as "$STRANGER" "$PORT" store k "$T/v"
check "an I/O Connect through the discovery listener is refused" refused as "$STRANGER" "$DP" exist k
check "discovery through the discovery listener still works" bash -c "'$NKV' -q '$STRANGER' -a 127.0.0.1 -s $DP discover | grep -q '$NQN'"

# 2. Live listeners off loopback.
LP=$(free_port)
ctl d1 listener add "0.0.0.0:$LP" >"$T/out" 2>&1; rc=$?
check "listener add 0.0.0.0: refused, FAILED_PRECONDITION (exit $rc), naming the subsystem and the fix" \
	bash -c "[ $rc = 5 ] && grep -q '$NQN' '$T/out' && grep -q 'host allow' '$T/out'"
check "nothing committed: listener list has no 0.0.0.0:$LP" bash -c "! '$CTL' --server 'unix:$T/d1.sock' listener list | grep -q ':$LP'"
check "nothing listens on $LP" refused as "$STRANGER" "$LP" exist k
if [ "$(id -u)" = 0 ] && EXTRA="198.18.$((RANDOM % 250 + 1)).$((RANDOM % 250 + 1))" && ip addr add "$EXTRA/32" dev lo 2>/dev/null; then
	ctl d1 listener add "$EXTRA:$LP" >"$T/out" 2>&1; rc=$?
	check "listener add $EXTRA (a local address off loopback): refused (exit $rc)" [ "$rc" = 5 ]
	check "nothing listens on $EXTRA:$LP" bash -c "! timeout 20 '$NKV' --timeout 3000 -q '$STRANGER' -a $EXTRA -s $LP -n '$NQN' exist k >/dev/null 2>&1"
else
	EXTRA=""
	if [ "${NKV_REQUIRE_ROOT:-${NKV_REQUIRE_RADOS:-0}}" = 1 ]; then bad "cannot add an address to lo (not root?)"
	else echo "# not root: the check with an address off loopback is left out (0.0.0.0 covers the rule)"; fi
fi
check "listener add on loopback is still fine" ctl d1 listener add "127.0.0.1:$LP"
ctl d1 listener add "127.0.0.1:$(free_port)" --tls >"$T/out" 2>&1; rc=$?
check "listener add --tls without TLS keys: refused before the commit (exit $rc)" \
	bash -c "[ $rc = 5 ] && grep -qi 'no TLS keys' '$T/out' && ! '$CTL' --server 'unix:$T/d1.sock' -o json listener list | grep -q '\"tls\":true'"

# 3. Allowlists live.
check "subsystem get: any host, loopback only" bash -c "'$CTL' --server 'unix:$T/d1.sock' subsystem get '$NQN' | grep -q 'loopback and TLS listeners only'"
check "host allow on the default subsystem" ctl d1 host allow "$NQN" "$ALLOWED"
check "the allowed host connects" as "$ALLOWED" "$PORT" exist k
check "the stranger is refused now (the first host made it an allowlist)" refused as "$STRANGER" "$PORT" exist k
check "an open subsystem created live" ctl d1 subsystem add "$OPEN" --pool nkv --allow-any-host
check "ns add on it" ctl d1 ns add "$OPEN" --nsid 1 --rados-ns lb-open
check "the stranger uses it" as "$STRANGER" "$PORT" -n "$OPEN" store k "$T/v"
ctl d1 host allow "$OPEN" "$ALLOWED" >"$T/out" 2>&1; rc=$?
check "host allow on an allow-any-host subsystem: refused with the way to close it (exit $rc)" \
	bash -c "[ $rc = 5 ] && grep -q \"host disallow $OPEN '\\*'\" '$T/out'"
check "host disallow '*' closes it" ctl d1 host disallow "$OPEN" '*'
check "the stranger is refused on it" refused as "$STRANGER" "$PORT" -n "$OPEN" exist k
check "host allow '*' opens it again" ctl d1 host allow "$OPEN" '*'
check "the stranger uses it again" as "$STRANGER" "$PORT" -n "$OPEN" exist k
check "listener add 0.0.0.0 is accepted once no subsystem is open by default" ctl d1 listener add "0.0.0.0:$(free_port)"
stop d1

# 4. A stored state applied by a daemon with a listener off loopback.
S=$T/state.json
check "daemon s1: state file, loopback only, no hosts" start s1 --gateway-name gw-s1 -s "$NQN" -l 127.0.0.1:0 -d none --state-file "$S"
stop s1
check "the stored state does not open the subsystem to any host explicitly" \
	bash -c "grep -q '\"loopback_any_host\":true' '$S' && ! grep -q '\"allow_any_host\":true' '$S'"
SP=$(free_port)
out=$("$D" -b mem --gateway-name gw-s2 -s "$NQN" -a "$ALLOWED" -l "0.0.0.0:$SP" -d none --state-file "$S" --control none --check 2>&1); rc=$?
check "--check names the stored state and that it wins ($rc)" \
	bash -c "[ $rc = 0 ] && grep -q 'stored state: file:$S, epoch 1' <<<'$out' && grep -q 'wins over' <<<'$out'"
check "--check shows the stored subsystem is not served on 0.0.0.0:$SP" \
	bash -c "grep -q 'not served on 0.0.0.0:$SP' <<<'$out'"
check "daemon s2: the same state, a listener on 0.0.0.0, an allowlist in its flags" \
	start s2 --gateway-name gw-s2 -s "$NQN" -a "$ALLOWED" -l "0.0.0.0:$SP" -d none --state-file "$S"
check "the stranger is refused through 0.0.0.0:$SP" refused as "$STRANGER" "$SP" exist k
check "its discovery log leaves the subsystem out on 0.0.0.0:$SP" \
	bash -c "'$NKV' -q '$STRANGER' -a 127.0.0.1 -s $SP discover >'$T/disc' 2>&1; ! grep -q '$NQN' '$T/disc'"
check "the daemon logs why and how to repair it" grep -q "listener .*0.0.0.0/$SP is not on loopback: its Connects there are refused" "$T/s2.log"
check "host allow through s2 makes it an allowlist" ctl s2 host allow "$NQN" "$ALLOWED"
check "the allowed host connects through 0.0.0.0:$SP" as "$ALLOWED" "$SP" store k "$T/v"
check "the stranger is still refused" refused as "$STRANGER" "$SP" exist k
check "the allowed host finds it in the discovery log on 0.0.0.0:$SP" \
	bash -c "'$NKV' -q '$ALLOWED' -a 127.0.0.1 -s $SP discover | grep -q '$NQN'"
stop s2
[ "$fail" = 0 ] || for f in "$T"/*.log; do echo "--- $f"; tail -15 "$f"; done
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
