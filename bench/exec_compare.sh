#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# exec_compare.sh - computational storage (issue 13): a reduction of a large value run inside the OSD by
# a vendor Exec command, against Retrieve of the value + the same reduction on the client, in one run:
#   Exec 8Ah   lua.eval_json with the Lua word-sum script bound in the allowlist (bench/exec_bench.c
#              prints it: exec_bench --lua-script); the OSD reads the object and returns the sum as text
#   Retrieve   the whole value over NVMe/TCP, then the same sum in C on the client
# Builds the release preset (rados-nkv, exec_bench), starts a micro cluster (bluestore, ceph-dev.sh
# --durable) and a rados-nkv whose JSON configuration allowlists 8Ah on NSID 1, runs bench/exec_bench
# and prints its table (latency p50/p90, payload and TCP bytes per operation, ratios Exec / Retrieve+sum)
# with the machine it ran on.
#
#   bench/exec_compare.sh [--size-mib 32] [--iters 20] [--no-build] [--keep]
# Environment: NKV_EXEC_CEPH_DIR (cluster directory, default /tmp/nkv-ceph-exec; an existing cluster
# there is reused), BUILD (default build/release). --keep leaves the cluster running.
set -euo pipefail
SELF=$(realpath "$0")
cd "$(dirname "$SELF")/.."
SIZE=32; ITERS=20; BUILD_IT=1; KEEP=0
while [ $# -gt 0 ]; do
	case "$1" in
	--size-mib) SIZE="$2"; shift 2 ;;
	--iters) ITERS="$2"; shift 2 ;;
	--no-build) BUILD_IT=0; shift ;;
	--keep) KEEP=1; shift ;;
	-h|--help) sed -n '2,/^set -euo/p' "$SELF" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "exec_compare.sh: unknown argument '$1' (--help)" >&2; exit 64 ;;
	esac
done
BUILD=${BUILD:-build/release}
CDIR=${NKV_EXEC_CEPH_DIR:-/tmp/nkv-ceph-exec}
RUN=$(mktemp -d /tmp/nkv-exec-bench.XXXXXX)
log() { echo "exec_compare: $*" >&2; }

if [ "$BUILD_IT" = 1 ]; then
	log "building ($BUILD: rados-nkv, exec_bench)"
	if [ "$BUILD" = build/release ]; then cmake --preset release >"$RUN/cmake.log" 2>&1
	else cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >"$RUN/cmake.log" 2>&1; fi || { cat "$RUN/cmake.log"; exit 1; }
	cmake --build "$BUILD" -j"$(nproc)" --target rados-nkv exec_bench >"$RUN/build.log" 2>&1 ||
		{ tail -30 "$RUN/build.log"; exit 1; }
fi
DAEMON=$BUILD/rados-nkv; EB=$BUILD/bench/exec_bench

DPID=""
cleanup() {
	if [ -n "$DPID" ]; then
		kill -TERM "$DPID" 2>/dev/null || true
		for _ in $(seq 50); do kill -0 "$DPID" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$DPID" 2>/dev/null || true
	fi
	[ "$KEEP" = 1 ] || bash scripts/ceph-dev.sh stop --dir "$CDIR" >/dev/null 2>&1 || true
	rm -rf "$RUN"
}
trap cleanup EXIT

bash scripts/ceph-dev.sh start --durable --dir "$CDIR" >&2
eval "$(bash scripts/ceph-dev.sh env --dir "$CDIR")"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
NQN=nqn.2026-11.io.rados-nkv:exec-bench
"$EB" --lua-script >"$RUN/sum.lua"
cat >"$RUN/rados-nkv.json" <<EOF
{
  "backend": { "type": "rados", "ceph_conf": "$NKV_CEPH_CONF", "keyring": "$NKV_CEPH_KEYRING",
               "client_id": "${NKV_CEPH_USER:-admin}", "op_timeout_s": 300 },
  "listeners": [ { "address": "127.0.0.1", "port": $PORT } ],
  "discovery": false,
  "subsystems": [ { "nqn": "$NQN", "pool": "$NKV_CEPH_POOL", "namespaces": [
    { "nsid": 1, "rados_namespace": "exec-bench", "max_value": "${SIZE}M",
      "exec": [ { "opcode": "0x8a", "class": "lua", "method": "eval_json", "mode": "read",
                  "script_file": "$RUN/sum.lua", "handler": "sum" } ] } ] } ],
  "log_level": "warn"
}
EOF
"$DAEMON" -c "$RUN/rados-nkv.json" --check >&2
"$DAEMON" -c "$RUN/rados-nkv.json" 2>"$RUN/rados-nkv.log" &
DPID=$!
end=$((SECONDS + 30))
until (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; do
	kill -0 "$DPID" 2>/dev/null && [ $SECONDS -lt "$end" ] || { cat "$RUN/rados-nkv.log"; exit 1; }
	sleep 0.2
done

echo "## Computational storage: Exec vs Retrieve ($(date -u +%Y-%m-%d))"
echo
echo "machine: $(nproc) CPUs ($(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n 1)), $(free -g | awk '/^Mem:/ { print $2 }') GiB," \
	"Linux $(uname -r); $(ceph --version | sed 's/ (.*//'), 1 mon + 1 OSD (bluestore on a sparse file), loopback"
echo "command: bench/exec_compare.sh --size-mib $SIZE --iters $ITERS"
echo
# The OSD's own count of bytes it returned to clients (here: only rados-nkv), around the run: what
# crossed gateway <- OSD. Retrieve moves the value; Exec only the method's output.
osd_out() {
	timeout 20 ceph --admin-daemon "$CDIR/run/osd.0.asok" perf dump 2>/dev/null |
		python3 -c 'import json, sys; print(json.load(sys.stdin)["osd"]["op_out_bytes"])' 2>/dev/null || echo ""
}
o0=$(osd_out)
rc=0
"$EB" -a 127.0.0.1 -p "$PORT" -n "$NQN" -o 0x8a -s "$SIZE" -i "$ITERS" || rc=$?
o1=$(osd_out)
if [ -n "$o0" ] && [ -n "$o1" ]; then
	echo
	awk -v d=$((o1 - o0)) -v r=$((ITERS + 1)) -v v=$((SIZE << 20)) 'BEGIN {
		printf "gateway <- OSD (OSD perf counter op_out_bytes): %d bytes over %d Exec + %d Retrieve (warm-up included) = %.0f bytes per round = the value (%d bytes) + %.0f: the value crosses OSD -> gateway once per round (Retrieve); the Exec reply is the rest\n", d, r, r, d / r, v, d / r - v }'
fi
if [ -s "$RUN/rados-nkv.log" ]; then log "rados-nkv log:"; cat "$RUN/rados-nkv.log" >&2; fi
exit $rc
