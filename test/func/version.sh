#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# version.sh - issue 17 finding 12: one version, from CMake, everywhere. `rados-nkv --version`,
# `nkv --version` (and the libnkv it runs with) and Identify Controller's FR field, read over NVMe/TCP
# from a mem-backend daemon, must all equal project(VERSION) in CMakeLists.txt.
# Usage: version.sh PATH/rados-nkv PATH/nkv VERSION. Exit 0 pass, 1 fail.
set -uo pipefail
DAEMON=$1 CLI=$2 WANT=$3
T=$(mktemp -d)
DPID=""
cleanup() {
	[ -n "$DPID" ] && kill -KILL "$DPID" 2>/dev/null && wait "$DPID" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT
pass=0 fail=0
ok() { echo "ok - $*"; pass=$((pass + 1)); }
bad() { echo "FAIL - $*"; fail=$((fail + 1)); }
expect() { # expect DESCRIPTION GOT WANT
	if [ "$2" = "$3" ]; then ok "$1: '$2'"; else bad "$1: got '$2', want '$3'"; fi
}

expect "rados-nkv --version" "$("$DAEMON" --version 2>&1)" "rados-nkv $WANT"
expect "rados-nkv -V" "$("$DAEMON" -V 2>&1)" "rados-nkv $WANT"
expect "nkv --version (with the libnkv it runs)" "$("$CLI" --version 2>&1)" "nkv $WANT (libnkv $WANT)"

# Identify Controller FR: port 0 lets the kernel pick; the pid file appears once listening.
NQN=nqn.2026-11.io.rados-nkv:version-$$
"$DAEMON" --backend mem --listen 127.0.0.1:0 --discovery none --subsys "$NQN" --pid-file "$T/pid" \
	>"$T/daemon.log" 2>&1 </dev/null &
DPID=$!
for _ in $(seq 200); do [ -s "$T/pid" ] || ! kill -0 "$DPID" 2>/dev/null && break; sleep 0.05; done
PORT=$(grep -o 'NVMe/TCP on 127\.0\.0\.1:[0-9]*' "$T/daemon.log" | head -1 | sed 's/.*://')
if [ -z "$PORT" ]; then
	bad "the daemon did not start:"; sed 's/^/#   /' "$T/daemon.log"
else
	FR=$("$CLI" --timeout 5000 -s "$PORT" -n "$NQN" -o json identify 2>&1 | sed -n 's/.*"fr":"\([^"]*\)".*/\1/p')
	expect "Identify Controller FR over NVMe/TCP" "$FR" "$WANT"
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
