#!/usr/bin/env bash
# The long tier of the fault suite (not in CI; run before a release note): its own durable micro
# cluster, then fault_cluster with 20 s outages, 4 MiB values and the monitor and OSD down together.
#   scripts/faults-long.sh [PRESET]     # default asan; builds it first
set -euo pipefail
cd "$(dirname "$0")/.."
PRESET=${1:-asan}
DIR=${NKV_FAULTS_CEPH_DIR:-/tmp/nkv-ceph-faults}
cmake --preset "$PRESET" >/dev/null
cmake --build --preset "$PRESET" -j"$(nproc)" --target fault_cluster
bash scripts/ceph-dev.sh start --durable --dir "$DIR"
trap 'bash scripts/ceph-dev.sh stop --dir "$DIR"' EXIT
eval "$(bash scripts/ceph-dev.sh env --dir "$DIR")"
"build/$PRESET/test/fault_cluster" rados tcp --long
