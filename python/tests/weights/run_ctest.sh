#!/usr/bin/env bash
# ctest entry for rados_nkv.weights: run_ctest.sh mem|rados [PYTHON]
# Runs python/tests/weights against a rados-nkv daemon of one backend that the tests start (the
# fixtures of python/tests/conftest.py). rados without a cluster (scripts/ceph-dev.sh env) exits 77
# (skipped), or 1 with NKV_REQUIRE_RADOS=1. NKV_DAEMON, NKV_LIBRARY and, for the asan build,
# LD_PRELOAD come from the ctest registration in test/CMakeLists.txt.
set -u
backend="${1:?usage: run_ctest.sh mem|rados [PYTHON]}"
py="${2:-/usr/bin/python3}"
here="$(cd "$(dirname "$0")" && pwd)"

if [ "$backend" = rados ] && [ -z "${NKV_CEPH_CONF:-}" ]; then
  if [ "${NKV_REQUIRE_RADOS:-0}" = 1 ]; then
    echo "python_weights_rados: NKV_REQUIRE_RADOS=1 but no cluster (eval \"\$(scripts/ceph-dev.sh env)\")" >&2
    exit 1
  fi
  echo "python_weights_rados: no cluster (NKV_CEPH_CONF unset): skipped"
  exit 77
fi
for m in pytest torch tqdm; do
  if ! "$py" -c "import $m" 2>/dev/null; then
    echo "python_weights_$backend: $py lacks $m (apt-get install python3-$m; scripts/deps.sh)" >&2
    exit 1
  fi
done
export PYTHONDONTWRITEBYTECODE=1   # nothing written into the source tree
exec "$py" -m pytest -q -p no:cacheprovider -o console_output_style=classic "$here" --nkv-backend "$backend" -rfEsx
