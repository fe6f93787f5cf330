#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# topology.sh - the topology tier's cluster (CTest label "topology"; scripts/test.sh runs it after the main
# suite): 1 mon + 3 bluestore OSDs of its own (scripts/ceph-dev.sh start --osds 3 --ec-pool nkv-ec),
# a replicated size-3 pool "nkv" (also the meta pool) and a k=2 m=1 erasure-coded pool "nkv-ec".
# Its own cluster, so the tests that kill one of its OSDs never touch the main suite's.
#   topology.sh start DIR         build and start it (a fixture's setup; idempotent)
#   topology.sh run DIR CMD...    run CMD with the cluster's environment (scripts/ceph-dev.sh env)
#   topology.sh stop DIR          stop it and remove DIR (the fixture's cleanup)
# Without Ceph's daemons: exit 77 (skipped), or 1 with NKV_REQUIRE_RADOS=1.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CMD=${1:?usage: $0 start|run|stop DIR [CMD...]}
DIR=${2:?usage: $0 start|run|stop DIR [CMD...]}
shift 2
dev() { bash "$ROOT/scripts/ceph-dev.sh" "$@" --dir "$DIR"; }

case "$CMD" in
start)
	if ! command -v ceph-osd >/dev/null || ! command -v ceph-mon >/dev/null; then
		[ "${NKV_REQUIRE_RADOS:-0}" = 1 ] && { echo "FAIL - NKV_REQUIRE_RADOS=1 but ceph-mon/ceph-osd are missing"; exit 1; }
		echo "skip: ceph-mon/ceph-osd not installed (scripts/deps.sh)"; exit 77
	fi
	t0=$SECONDS
	# A cluster left by an earlier run that was cut short: rebuilt, never reused half-killed.
	dev stop >/dev/null 2>&1
	rm -rf "$DIR"
	dev start --osds 3 --ec-pool nkv-ec || exit 1
	echo "topology: 3-OSD cluster ready in $((SECONDS - t0)) s ($DIR)"
	;;
run)
	[ $# -gt 0 ] || { echo "usage: $0 run DIR CMD..."; exit 64; }
	[ -f "$DIR/state" ] || { echo "FAIL - no topology cluster in $DIR (topology.sh start)"; exit 1; }
	eval "$(dev env)"
	export NKV_REQUIRE_RADOS=1
	exec "$@"
	;;
stop)
	dev stop
	rm -rf "$DIR"
	;;
*) echo "usage: $0 start|run|stop DIR [CMD...]"; exit 64 ;;
esac
