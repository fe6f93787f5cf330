#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The whole test suite, as CI runs it: install the Debian packages, build the asan preset, start a
# micro Ceph cluster, run every CTest test (unit, functional on mem and on RADOS, fuzz replay), stop the
# cluster, then the topology tier (label topology: a 3-OSD cluster of its own, after the main suite
# because 3 more OSDs beside its -j2 tests would overload a 2-core machine), and fail if any RADOS
# test was skipped or did not run. The long tier (label long: minutes each, paths other tests already
# cover on RADOS) is run by hand: ctest --preset asan -L long.
#   scripts/test.sh            # everything
#   PRESET=debug scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PRESET=${PRESET:-asan}
CEPH_DIR=${NKV_TEST_CEPH_DIR:-/tmp/nkv-ceph-test}
LOG=build/$PRESET/ctest.log

bash scripts/deps.sh
# --- Linux kernel interop (test/interop): QEMU, nvme-cli, the Debian kernel and an initramfs, cached
# in /var/cache/nkv-interop; the interop_mem/interop_rados tests must run, never skip.
bash test/interop/prepare.sh
NKV_INTEROP_KERNEL_PKG=linux-image-6.12-amd64 bash test/interop/prepare.sh   # interop_auth (DH-HMAC-CHAP)
export NKV_REQUIRE_INTEROP=1
# ---
cmake --preset "$PRESET" >/dev/null
cmake --build --preset "$PRESET" -j"$(nproc)"

stop_cluster() { bash scripts/ceph-dev.sh stop --dir "$CEPH_DIR"; }
# bluestore on a sparse file: memstore's space accounting can go negative after many deletes and
# then the OSD refuses every write as "full" (seen in long runs).
# A fresh cluster every run: one kept from earlier runs (some cut short) filled its 10 GiB and turned
# every rados test into 81h. NKV_TEST_KEEP_CLUSTER=1 restarts the existing one instead.
if [ "${NKV_TEST_KEEP_CLUSTER:-0}" != 1 ]; then
	stop_cluster >/dev/null 2>&1
	rm -rf "$CEPH_DIR"
fi
bash scripts/ceph-dev.sh start --durable --dir "$CEPH_DIR"
trap stop_cluster EXIT
eval "$(bash scripts/ceph-dev.sh env --dir "$CEPH_DIR")"
export NKV_REQUIRE_RADOS=1   # a rados test without a cluster fails instead of skipping

set +e
ctest --preset "$PRESET" -j2 -LE "topology|long" 2>&1 | tee "$LOG"
rc=${PIPESTATUS[0]}
set -e

# The RADOS tests must have run, every one of them, and passed (by name, from the label).
names=$(ctest --preset "$PRESET" -N -L rados -LE long | sed -n 's/^ *Test *#[0-9]*: //p')
want=$(echo "$names" | grep -c . || true)
ran=0
for n in $names; do
  grep -qE "Test +#[0-9]+: $n \.+ +Passed" "$LOG" && ran=$((ran + 1))
done
if [ "${want:-0}" -eq 0 ] || [ "$ran" -ne "$want" ]; then
  echo "RADOS tests: $ran of ${want:-0} passed; they must all run against the micro cluster" >&2
  rc=1
fi
trap - EXIT
stop_cluster   # before the summary, so the summary stays the last line
total=$(sed -n 's/.*tests failed out of \([0-9]*\).*/\1/p' "$LOG" | tail -1)
failed=$(sed -n 's/.* \([0-9]*\) tests failed out of.*/\1/p' "$LOG" | tail -1)
echo "rados label: $ran of $want tests ran and passed"

# The topology tier: its fixtures start and stop their own 3-OSD cluster.
TLOG=build/$PRESET/ctest-topology.log
t1=$(date +%s)
set +e
ctest --preset "$PRESET" -L topology --output-on-failure 2>&1 | tee "$TLOG"
trc=${PIPESTATUS[0]}
set -e
[ "$trc" = 0 ] || rc=1
ttotal=$(sed -n 's/.*tests failed out of \([0-9]*\).*/\1/p' "$TLOG" | tail -1)
tfailed=$(sed -n 's/.* \([0-9]*\) tests failed out of.*/\1/p' "$TLOG" | tail -1)
[ -n "$ttotal" ] || { ttotal=1; tfailed=1; }   # no ctest summary: count the tier as one failure
echo "topology tier: $(( ttotal - ${tfailed:-0} )) of $ttotal passed in $(( $(date +%s) - t1 )) s"
total=$(( ${total:-0} + ttotal )); failed=$(( ${failed:-0} + ${tfailed:-0} ))
echo "ctest: $(( ${total:-0} - ${failed:-0} )) passed, ${failed:-0} failed" | tee "build/$PRESET/summary.txt"
exit "$rc"
