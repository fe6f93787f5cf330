#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# smoke.sh BUILD_DIR - the CI version of bench/compare.sh (ctest bench_smoke): its own micro cluster,
# tiny values at QD 1 and 16 through raw librados, rados-nkv over NVMe/TCP and (when built) shm; passes
# when every point ran and verified its data. Speed is not checked. Exit 77 (skip) without Ceph.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=$(realpath "${1:?usage: smoke.sh BUILD_DIR}")
for b in ceph-mon ceph-osd rados; do
	command -v "$b" >/dev/null || { echo "bench_smoke: $b not installed (scripts/deps.sh): skipped"; exit 77; }
done
[ -x "$BUILD_DIR/bench/rados_bench" ] || { echo "bench_smoke: rados_bench not built (no librados): skipped"; exit 77; }
export NKV_BENCH_CEPH_DIR=${NKV_BENCH_CEPH_DIR:-/tmp/nkv-ceph-bench-smoke}
BUILD=$BUILD_DIR exec bash bench/compare.sh --smoke --no-build
