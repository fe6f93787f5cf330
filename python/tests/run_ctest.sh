#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# ctest entry of the Python suites: run_ctest.sh core|lmcache|weights mem|rados [PYTHON]
#   core     python/tests (the package itself; not the integrations' own suites)
#   lmcache  python/tests/lmcache (LMCache's classes re-created in lmcache/standins)
#   weights  python/tests/weights (nkv-weights, the vLLM loader against stand-ins)
# against a rados-nkv daemon of one backend that python/tests/conftest.py starts (NVMe/TCP and shm).
# rados without a cluster (scripts/ceph-dev.sh env) exits 77 (skipped), or 1 with
# NKV_REQUIRE_RADOS=1. NKV_DAEMON, NKV_LIBRARY and, for the asan build, LD_PRELOAD come from the
# ctest registration in test/CMakeLists.txt.
set -u
usage="usage: run_ctest.sh core|lmcache|weights mem|rados [PYTHON]"
suite="${1:?$usage}" backend="${2:?$usage}"
py="${3:-/usr/bin/python3}"
here="$(cd "$(dirname "$0")" && pwd)"
case "$suite" in
  core) dir="$here" name="python_$backend" mods="pytest numpy"
        extra=(--ignore="$here/lmcache" --ignore="$here/weights") ;;
  lmcache|weights) dir="$here/$suite" name="python_${suite}_$backend" extra=()
        mods="pytest numpy torch"; [ "$suite" = weights ] && mods="pytest torch tqdm" ;;
  *) echo "$usage" >&2; exit 64 ;;
esac

if [ "$backend" = rados ] && [ -z "${NKV_CEPH_CONF:-}" ]; then
  if [ "${NKV_REQUIRE_RADOS:-0}" = 1 ]; then
    echo "$name: NKV_REQUIRE_RADOS=1 but no cluster (eval \"\$(scripts/ceph-dev.sh env)\")" >&2
    exit 1
  fi
  echo "$name: no cluster (NKV_CEPH_CONF unset): skipped"
  exit 77
fi
for m in $mods; do
  if ! "$py" -c "import $m" 2>/dev/null; then
    echo "$name: $py lacks $m (apt-get install python3-$m; scripts/deps.sh)" >&2
    exit 1
  fi
done
export PYTHONDONTWRITEBYTECODE=1   # nothing written into the source tree
exec "$py" -m pytest -q -p no:cacheprovider -o console_output_style=classic "$dir" "${extra[@]}" \
  --nkv-backend "$backend" -rfEsx
