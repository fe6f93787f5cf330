#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The long tier of the fault suite (not in CI; run before a release note, about 20 minutes): its own
# durable (bluestore) micro cluster, then every scenario of test/faults with --long: 20 s OSD, monitor
# and monitor+OSD outages, 10 gateway kills, 100 raw hosts cut mid-H2C and 50 shared-memory hosts
# killed, 120 s of netem (the host kernel's or a router VM's; root, else skipped), a 10-minute soak of
# 64 connections x QD 16.
# Each scenario's RESULT line is repeated in a table at the end; exit 1 if any scenario failed.
# The soak's daemon comes from the release preset (SOAK_PRESET): over ten minutes ASan's own allocator
# and shadow memory grow the asan daemon's RSS by about 20 % with nothing leaked (LeakSanitizer clean),
# while the release daemon stays flat; the other scenarios run the PRESET build.
#   scripts/faults-long.sh [--preset PRESET] [SCENARIO...]   # default: asan, all scenarios
# NKV_FAULTS_CEPH_DIR: the cluster's directory (default /tmp/nkv-ceph-faults); the logs of the run are
# kept in DIR/long-tier/. SOAK_PRESET: the soak daemon's preset (default release).
set -uo pipefail
cd "$(dirname "$0")/.."
PRESET=asan
if [ "${1:-}" = --preset ]; then PRESET=${2:?--preset needs a value}; shift 2; fi
SCENARIOS=${*:-osd mon both gateway host netem soak}
DIR=${NKV_FAULTS_CEPH_DIR:-/tmp/nkv-ceph-faults}
SOAK_PRESET=${SOAK_PRESET:-release}
for p in "$PRESET" "$SOAK_PRESET"; do
	cmake --preset "$p" >/dev/null || exit 1
done
cmake --build --preset "$PRESET" -j"$(nproc)" --target fault_suite rados-nkv || exit 1
cmake --build --preset "$SOAK_PRESET" -j"$(nproc)" --target rados-nkv || exit 1
SUITE=build/$PRESET/test/fault_suite
DAEMON=build/$PRESET/rados-nkv
bash scripts/ceph-dev.sh start --durable --dir "$DIR" || exit 1
trap 'bash scripts/ceph-dev.sh stop --dir "$DIR"' EXIT
eval "$(bash scripts/ceph-dev.sh env --dir "$DIR")"
export NKV_REQUIRE_RADOS=1
LOGS=$DIR/long-tier
mkdir -p "$LOGS"
declare -A RC
for s in $SCENARIOS; do
	t0=$SECONDS
	echo "=== $s (long tier)"
	if [ "$s" = netem ]; then
		bash test/faults/netem.sh "$SUITE" "$DAEMON" --long
	elif [ "$s" = soak ]; then
		"$SUITE" soak --daemon "build/$SOAK_PRESET/rados-nkv" --long
	else
		"$SUITE" "$s" --daemon "$DAEMON" --long
	fi 2>&1 | tee "$LOGS/$s.log"
	RC[$s]=${PIPESTATUS[0]}
	echo "=== $s: exit ${RC[$s]} after $((SECONDS - t0)) s"
done
echo
echo "long tier summary (logs in $LOGS):"
fail=0
for s in $SCENARIOS; do
	case ${RC[$s]} in 0) st=passed ;; 77) st=skipped ;; *) st=FAILED; fail=1 ;; esac
	echo "  $s: $st"
	grep -h '^RESULT\|^skip:' "$LOGS/$s.log" | sed 's/^/    /'
done
exit $fail
