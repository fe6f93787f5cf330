#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tcp_burst.sh - bursts of H2C data that fill whole connections: nkv bench with 4 connections x 64
# commands of 16 KiB (every Store takes an R2T; each connection gets 1 MiB of H2C data at once, the
# target's per-event read budget). A target that stopped reading with PDUs still in its receive
# buffer left the last Stores of a burst waiting for data it already had until the R2T deadline
# (30 s): 3 of 4 runs failed that way. Each run must finish, verified, well within the deadline.
#
#   bash test/func/tcp_burst.sh BUILD_DIR
#
# The last line is "N passed, N failed".
set -u
BUILD=$(realpath "${1:?usage: $0 BUILD_DIR}")
D="$BUILD/rados-nkv" N="$BUILD/nkv"
[ -x "$D" ] && [ -x "$N" ] || { echo "skip: no daemon or CLI in $BUILD"; exit 77; }
PASS=0 FAILN=0
P=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
NQN=nqn.2026-11.io.rados-nkv:burst
"$D" --backend mem --listen "127.0.0.1:$P" --discovery none --subsys "$NQN" --ns 1 --log-level warn &
DPID=$!
trap 'kill -KILL $DPID 2>/dev/null' EXIT
# ready once Exist answers: 0 (present) or 2 (absent); 1 is a connection that failed
for _ in $(seq 100); do "$N" -a 127.0.0.1 -s "$P" -n "$NQN" exist probe >/dev/null 2>&1; [ $? = 2 ] && break; sleep 0.1; done
for run in 1 2 3 4 5 6; do
	start=$(date +%s%N)
	OUT=$(timeout 60 "$N" -a 127.0.0.1 -s "$P" -n "$NQN" --timeout 20000 bench qd=64 conns=4 size=16K keys=256 \
		prefix="b$run" 2>&1)
	RC=$? ms=$(( ($(date +%s%N) - start) / 1000000 ))
	if [ "$RC" = 0 ] && [ "$ms" -lt 15000 ] && grep -q 'verified 256 retrieved values: 0 mismatches, 0 errors' <<<"$OUT"; then
		PASS=$((PASS + 1)); echo "ok - burst $run: 256 stores + retrieves verified in $ms ms"
	else
		FAILN=$((FAILN + 1)); echo "FAIL - burst $run: exit $RC after $ms ms: $(tail -3 <<<"$OUT")"
	fi
done
kill -TERM $DPID; wait $DPID; RC=$?
if [ "$RC" = 0 ]; then PASS=$((PASS + 1)); echo "ok - daemon exits 0"; else FAILN=$((FAILN + 1)); echo "FAIL - daemon exit $RC"; fi
trap - EXIT
echo "$PASS passed, $FAILN failed"
[ "$FAILN" = 0 ]
