#!/usr/bin/env bash
# CTest entry of the LMCache integration tests (pytest in this directory):
#   run.sh mem|rados LIBNKV DAEMON
# mem: every test that needs no cluster (mem backend over NVMe/TCP and shm, and the
# backend-independent ones); rados: the same tests on the micro cluster named by NKV_CEPH_CONF
# (exit 77 without it, 1 with NKV_REQUIRE_RADOS=1). An AddressSanitizer libnkv gets libasan
# preloaded into python. NKV_PYTHON picks the interpreter (default /usr/bin/python3: Debian's,
# with python3-pytest, python3-torch and python3-numpy).
set -u
backend=${1:?usage: run.sh mem|rados LIBNKV DAEMON}
export NKV_LIBRARY=${2:?libnkv path} NKV_DAEMON=${3:?rados-nkv path}
here=$(cd "$(dirname "$0")" && pwd)
py=${NKV_PYTHON:-/usr/bin/python3}

if [ "$backend" = rados ] && [ -z "${NKV_CEPH_CONF:-}" ]; then
	if [ "${NKV_REQUIRE_RADOS:-}" = 1 ]; then
		echo "FAIL - NKV_REQUIRE_RADOS=1 but NKV_CEPH_CONF is not set (scripts/ceph-dev.sh env)"
		exit 1
	fi
	echo "skip: NKV_CEPH_CONF not set (start a cluster: scripts/ceph-dev.sh start; eval \"\$(scripts/ceph-dev.sh env)\")"
	exit 77
fi
if ! "$py" -c "import pytest, torch, numpy" 2>/dev/null; then
	echo "FAIL - $py lacks pytest, torch or numpy (Debian: python3-pytest python3-torch python3-numpy; scripts/deps.sh)"
	exit 1
fi
if ldd "$NKV_LIBRARY" 2>/dev/null | grep -q libasan; then
	LD_PRELOAD=$(gcc -print-file-name=libasan.so)
	export LD_PRELOAD ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
fi
case "$backend" in
	mem) sel="not rados" ;;
	rados) sel="rados" ;;
	*) echo "run.sh: backend must be mem or rados, not '$backend'"; exit 64 ;;
esac
export PYTHONDONTWRITEBYTECODE=1
exec "$py" -m pytest -p no:cacheprovider -q -rs "$here" -k "$sel"
