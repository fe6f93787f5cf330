# SPDX-License-Identifier: Apache-2.0
# cli_lib.sh - sourced by the shell tests that drive the daemon and the CLIs (exec_cli.sh,
# cache_cli.sh): arguments BUILD_DIR mem|rados, the skip rule for rados without a cluster, a temporary
# directory T, counting (ok, fail; the caller prints "N passed, N failed"), run/check of a command's
# exit status and output, and a free TCP port P. Set NAME before sourcing it.
BUILD=$(realpath "${1:?usage: $0 BUILD_DIR mem|rados}")
BACKEND=${2:?usage: $0 BUILD_DIR mem|rados}
D="$BUILD/rados-nkv" N="$BUILD/nkv"
if [ "$BACKEND" = rados ] && [ -z "${NKV_CEPH_CONF:-}" ]; then
	[ "${NKV_REQUIRE_RADOS:-0}" = 1 ] && { echo "FAIL - NKV_REQUIRE_RADOS=1 but NKV_CEPH_CONF is not set"; exit 1; }
	echo "skip: NKV_CEPH_CONF not set"; exit 77
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/nkv-$NAME.XXXXXX")
PASS=0 FAILN=0 DPID=
ok() { PASS=$((PASS + 1)); echo "ok - $*"; }
fail() { FAILN=$((FAILN + 1)); echo "FAIL - $*"; }
cleanup() { [ -n "$DPID" ] && kill -KILL "$DPID" 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
run() { local s=$1; shift; OUT=$(timeout "$s" "$@" 2>&1); RC=$?; }
check() {
	if [ "$RC" = "$2" ] && grep -qE -- "$3" <<<"$OUT"; then ok "$1"; else fail "$1 (exit $RC, output: $(head -c 300 <<<"$OUT"))"; fi
}
P=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
RNS="$NAME-$$-$RANDOM"
