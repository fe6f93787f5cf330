#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# demo.sh - the main job, end to end: (micro Ceph cluster,) the rados-nkv daemon on loopback, and
# the nkv CLI storing, listing, retrieving and deleting keys through NVMe/TCP.
#   BACKEND=rados (default) | mem     NKV_PORT (4420)  NKV_DISC_PORT (8009)  BUILD (build/release)
#   KEEP=1 leaves the daemon running afterwards (stop it with: kill $(cat $BUILD/rados-nkv.pid)).
set -euo pipefail
cd "$(dirname "$0")/.."
BACKEND=${BACKEND:-rados}
PORT=${NKV_PORT:-4420}
DPORT=${NKV_DISC_PORT:-8009}
BUILD=${BUILD:-build/release}
NKV="$BUILD/nkv"
LOG="$BUILD/rados-nkv.log"
PIDF="$BUILD/rados-nkv.pid"

args=(--backend "$BACKEND" --listen "127.0.0.1:$PORT" --discovery "127.0.0.1:$DPORT" --pid-file "$PIDF")
if [ "$BACKEND" = rados ]; then
	bash scripts/ceph-dev.sh start
	eval "$(bash scripts/ceph-dev.sh env)"
	args+=(--ceph-conf "$NKV_CEPH_CONF" --keyring "$NKV_CEPH_KEYRING" --client-id "$NKV_CEPH_USER"
	       --pool "$NKV_CEPH_POOL" --ns 1:demo)
fi

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }

# The demo must talk to its own daemon: a port someone else serves would make it "pass" against
# their target. Refuse taken ports up front, and call the daemon ready only once it wrote its own
# pid into the pid file (it does so after every listener is bound).
for p in "$PORT" "$DPORT"; do
	if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
		echo "demo: 127.0.0.1:$p is already in use by another process; free it or pick other ports" \
		     "(NKV_PORT=... NKV_DISC_PORT=...)" >&2
		exit 1
	fi
done
rm -f "$PIDF"
echo "starting: $BUILD/rados-nkv ${args[*]}   (log: $LOG)"
"$BUILD/rados-nkv" "${args[@]}" 2>"$LOG" &
daemon=$!
stop() {
	kill -TERM "$daemon" 2>/dev/null || return 0
	wait "$daemon" && echo "rados-nkv stopped cleanly" || echo "rados-nkv exited with status $?"
}
[ "${KEEP:-0}" = 1 ] || trap stop EXIT
ready=0
for _ in $(seq 300); do # ready within 30 s (a rados backend connects first), or show why not
	if ! kill -0 "$daemon" 2>/dev/null; then
		cat "$LOG" >&2; echo "demo: rados-nkv did not start (log above)" >&2; exit 1
	fi
	[ "$(cat "$PIDF" 2>/dev/null)" = "$daemon" ] && { ready=1; break; }
	sleep 0.1
done
[ "$ready" = 1 ] || { cat "$LOG" >&2; echo "demo: rados-nkv not ready after 30 s" >&2; exit 1; }

step "$NKV" -s "$DPORT" discover
step "$NKV" -s "$PORT" list-ns
step "$NKV" -s "$PORT" identify --ns
echo "a 256-token KV block would go here" >"$BUILD/demo-value.txt"
step "$NKV" -s "$PORT" store gpukey01 "$BUILD/demo-value.txt"
head -c 1048576 /dev/urandom >"$BUILD/demo-1m.bin"
step "$NKV" -s "$PORT" --hdgst --ddgst store block-0001 "$BUILD/demo-1m.bin"
step "$NKV" -s "$PORT" retrieve gpukey01 -
step "$NKV" -s "$PORT" retrieve block-0001 "$BUILD/demo-1m.out"
cmp "$BUILD/demo-1m.bin" "$BUILD/demo-1m.out" && echo "1 MiB value identical"
step "$NKV" -s "$PORT" list
if [ "$BACKEND" = rados ]; then
	step rados -c "$NKV_CEPH_CONF" -n "client.$NKV_CEPH_USER" --keyring "$NKV_CEPH_KEYRING" -p "$NKV_CEPH_POOL" -N demo ls
fi
step "$NKV" -s "$PORT" delete gpukey01
set +e
step "$NKV" -s "$PORT" exist gpukey01
echo "(exit status $?: 2 means not found)"
set -e
[ "${KEEP:-0}" = 1 ] && echo "rados-nkv keeps running on 127.0.0.1:$PORT (pid $daemon)"
exit 0
