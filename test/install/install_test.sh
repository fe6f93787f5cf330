#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# install_test.sh - issue 17 finding 5: `cmake --install` of this build into a temporary prefix gives a
# usable installation: the binaries (--version = the CMake version), the public headers, libnkv.so with
# its versioned SONAME exporting only the NKV_API functions of nkv.h/nkv_devq.h, a libnkv.a that links
# with `pkg-config --static`, libnkv.pc, the example configuration, rados-nkv@.service (checked with
# systemd-analyze where present) and the man pages (where scdoc was found). Then a small external
# program is built against the installed libnkv.pc, shared and static, and run.
# Usage: install_test.sh BUILD_DIR SOURCE_DIR VERSION SOVERSION HAVE_MAN(0|1) [EXTRA_CFLAGS]
# (EXTRA_CFLAGS: the sanitizer flags of a sanitized build, whose libnkv needs them). Exit 0 pass, 1 fail.
set -uo pipefail
BUILD=$1 SRC=$2 VERSION=$3 SOVERSION=$4 HAVE_MAN=$5 EXTRA_CFLAGS=${6:-}
CC=${CC:-cc}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
P=$T/prefix
pass=0 fail=0
ok() { echo "ok - $*"; pass=$((pass + 1)); }
bad() { echo "FAIL - $*"; fail=$((fail + 1)); }
check() { # check DESCRIPTION COMMAND...
	local d=$1
	shift
	if "$@" >"$T/out" 2>&1; then ok "$d"; else bad "$d"; sed 's/^/#   /' "$T/out" | head -20; fi
}
finish() { echo "$pass passed, $fail failed"; [ "$fail" -eq 0 ]; exit $?; }

if ! cmake --install "$BUILD" --prefix "$P" >"$T/install.log" 2>&1; then
	bad "cmake --install $BUILD --prefix $P"; sed 's/^/#   /' "$T/install.log" | tail -20
	finish
fi
ok "cmake --install into $P"
export PKG_CONFIG_PATH=
LIBDIR=$(dirname "$(find "$P" -name libnkv.pc | head -1)")
LIBDIR=${LIBDIR%/pkgconfig}
export PKG_CONFIG_PATH=$LIBDIR/pkgconfig
[ -f "$LIBDIR/pkgconfig/libnkv.pc" ] && ok "libnkv.pc installed ($LIBDIR/pkgconfig)" || { bad "no libnkv.pc under $P"; finish; }

# --- files ---------------------------------------------------------------------------------------
for b in rados-nkv nkv; do
	check "bin/$b --version is '$b $VERSION'" bash -c "'$P/bin/$b' --version | head -1 | grep -qx '$b $VERSION\( .*\)\?'"
done
[ -x "$P/bin/nkv-gpu-demo" ] &&
	check "bin/nkv-gpu-demo --version" bash -c "'$P/bin/nkv-gpu-demo' --version | grep -qx 'nkv-gpu-demo $VERSION'"
for h in nkv.h nkv_spec.h nkv_dev.h nkv_devq.h nkv_shm.h nkv_version.h; do
	check "include/nkv/$h" test -f "$P/include/nkv/$h"
done
check "nkv_version.h says $VERSION" grep -q "^#define NKV_VERSION_STRING \"$VERSION\"$" "$P/include/nkv/nkv_version.h"
check "libnkv.a" test -f "$LIBDIR/libnkv.a"
# shellcheck disable=SC2086
check "libnkv.a is PIC (its objects link into a shared object)" \
	$CC $EXTRA_CFLAGS -shared -o "$T/whole.so" -Wl,--whole-archive "$LIBDIR/libnkv.a" -Wl,--no-whole-archive -lisal -pthread
check "libnkv.so -> libnkv.so.$SOVERSION -> libnkv.so.$VERSION" \
	bash -c "[ \"\$(readlink '$LIBDIR/libnkv.so')\" = libnkv.so.$SOVERSION ] && [ \"\$(readlink '$LIBDIR/libnkv.so.$SOVERSION')\" = libnkv.so.$VERSION ] && [ -f '$LIBDIR/libnkv.so.$VERSION' ]"
check "SONAME libnkv.so.$SOVERSION" bash -c "readelf -d '$LIBDIR/libnkv.so' | grep -q 'SONAME.*\[libnkv.so.$SOVERSION\]'"
check "libnkv.so is position-independent (ELF type DYN, no TEXTREL)" \
	bash -c "readelf -h '$LIBDIR/libnkv.so' | grep -q 'Type: *DYN' && ! readelf -d '$LIBDIR/libnkv.so' | grep -q TEXTREL"

# exported symbols = exactly the NKV_API functions declared in the installed headers
sed -n 's/^NKV_API .*[ *]\(nkv_[a-z0-9_]*\)(.*/\1/p' "$P"/include/nkv/nkv.h "$P"/include/nkv/nkv_devq.h | sort -u >"$T/api"
nm -D --defined-only "$LIBDIR/libnkv.so" | awk '$2 ~ /^[TDBRVW]$/ {print $3}' |
	grep -vE '^(_init|_fini|_edata|_end|__bss_start)$' | sort -u >"$T/exported"
if [ -s "$T/api" ] && diff "$T/api" "$T/exported" >"$T/diff"; then
	ok "libnkv.so exports exactly the $(wc -l <"$T/api") NKV_API functions"
else
	bad "libnkv.so exports differ from the NKV_API functions (< API only, > exported only):"
	sed 's/^/#   /' "$T/diff" | head -20
fi

check "pkg-config --modversion libnkv = $VERSION" bash -c "[ \"\$(pkg-config --modversion libnkv)\" = '$VERSION' ]"
check "pkg-config --static --libs names isa-l and pthread" \
	bash -c "pkg-config --static --libs libnkv | grep -q -- '-lisal' && pkg-config --static --libs libnkv | grep -q -- '-pthread'"

check "etc/rados-nkv/example.json is conf/rados-nkv.json" cmp "$P/etc/rados-nkv/example.json" "$SRC/conf/rados-nkv.json"
UNIT=$(find "$P" -name 'rados-nkv@.service' | head -1)
check "rados-nkv@.service installed" test -n "$UNIT"
if [ -n "$UNIT" ]; then
	check "unit: ExecStart=$P/bin/rados-nkv -c $P/etc/rados-nkv/%i.json --run-dir /run/rados-nkv/%i" \
		grep -qx "ExecStart=$P/bin/rados-nkv -c $P/etc/rados-nkv/%i.json --run-dir /run/rados-nkv/%i" "$UNIT"
	check "unit: Restart=on-failure, NoNewPrivileges, ProtectSystem=strict" \
		bash -c "grep -qx Restart=on-failure '$UNIT' && grep -qx NoNewPrivileges=yes '$UNIT' && grep -qx ProtectSystem=strict '$UNIT'"
	# Type=notify exactly when the daemon can send READY=1 (linked with libsystemd): else start would hang
	if readelf -d "$P/bin/rados-nkv" | grep -q 'NEEDED.*libsystemd'; then
		check "unit: Type=notify (the daemon sends READY=1)" grep -qx Type=notify "$UNIT"
	else
		check "unit: Type=simple (the daemon was built without libsystemd)" grep -qx Type=simple "$UNIT"
	fi
	if command -v systemd-analyze >/dev/null; then
		cp "$UNIT" "$T/rados-nkv@test.service"
		check "systemd-analyze verify: no complaints" \
			bash -c "out=\$(systemd-analyze verify --man=no '$T/rados-nkv@test.service' 2>&1) && [ -z \"\$out\" ] || { echo \"\$out\"; false; }"
	fi
fi
if [ "$HAVE_MAN" = 1 ]; then
	check "share/man/man8/rados-nkv.8 (version $VERSION)" grep -q "rados-nkv $VERSION" "$P/share/man/man8/rados-nkv.8"
	check "share/man/man1/nkv.1 (version $VERSION)" grep -q "rados-nkv $VERSION" "$P/share/man/man1/nkv.1"
	check "rados-nkv.8 has CONFIGURATION, SIGNALS, FILES, EXIT STATUS" \
		bash -c "for s in CONFIGURATION SIGNALS FILES 'EXIT STATUS'; do grep -q \"^.SH \$s\" '$P/share/man/man8/rados-nkv.8' || exit 1; done"
	check "rados-nkv.8 documents --log-syslog" grep -q -- '--log-syslog' "$P/share/man/man8/rados-nkv.8"
	if [ -x "$P/bin/nkv-ctl" ]; then
		check "share/man/man8/nkv-ctl.8 beside bin/nkv-ctl" grep -q "rados-nkv $VERSION" "$P/share/man/man8/nkv-ctl.8"
	fi
	if [ -n "$UNIT" ] && command -v systemd-analyze >/dev/null && command -v man >/dev/null; then
		# the unit's Documentation=man:rados-nkv(8) resolves to the installed page
		check "systemd-analyze verify finds man:rados-nkv(8) (MANPATH=$P/share/man)" \
			bash -c "out=\$(MANPATH='$P/share/man' systemd-analyze verify '$T/rados-nkv@test.service' 2>&1) && [ -z \"\$out\" ] || { echo \"\$out\"; false; }"
	fi
else
	echo "# scdoc was not found at configure time: no man pages to check"
fi

# --- an external program against the installed libnkv.pc ------------------------------------------
cat >"$T/prog.c" <<'PROG'
/* Uses libnkv as an outside program would: the installed headers and nothing from the source tree. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <nkv/nkv.h>
#include <nkv/nkv_version.h>

int main(void)
{
	struct nkv_ctrl *c = NULL;

	if (strcmp(nkv_version(), NKV_VERSION_STRING) != 0)
		return 2;
	if (nkv_status_errno(0x87) != -ENOENT) /* Key Does Not Exist */
		return 3;
	if (nkv_connect(NULL, "4420", "nqn.x", NULL, &c) != -EINVAL)
		return 4;
	printf("libnkv %s\n", nkv_version());
	return 0;
}
PROG
# shellcheck disable=SC2086 # word splitting of the flags is intended
if $CC -std=c11 -Wall -Werror $EXTRA_CFLAGS -o "$T/prog-shared" "$T/prog.c" $(pkg-config --cflags --libs libnkv) >"$T/cc1" 2>&1; then
	ok "cc prog.c \$(pkg-config --cflags --libs libnkv)"
	check "prog-shared needs libnkv.so.$SOVERSION" bash -c "readelf -d '$T/prog-shared' | grep -q 'NEEDED.*\[libnkv.so.$SOVERSION\]'"
	check "prog-shared runs: 'libnkv $VERSION'" bash -c "[ \"\$(LD_LIBRARY_PATH='$LIBDIR' '$T/prog-shared')\" = 'libnkv $VERSION' ]"
else
	bad "cc prog.c \$(pkg-config --cflags --libs libnkv)"; sed 's/^/#   /' "$T/cc1" | head -20
fi
# --static: Libs.private and Requires.private must complete libnkv.a; -l:libnkv.a so that the .so
# next to it is not picked instead
STATIC_LIBS=$(pkg-config --static --libs libnkv)
STATIC_LIBS=${STATIC_LIBS/-lnkv/-l:libnkv.a}
# shellcheck disable=SC2086
if $CC -std=c11 -Wall -Werror $EXTRA_CFLAGS -o "$T/prog-static" "$T/prog.c" $(pkg-config --cflags libnkv) $STATIC_LIBS >"$T/cc2" 2>&1; then
	ok "cc prog.c \$(pkg-config --static --libs libnkv) with libnkv.a"
	check "prog-static does not need libnkv.so" bash -c "! readelf -d '$T/prog-static' | grep -q 'NEEDED.*libnkv'"
	check "prog-static runs: 'libnkv $VERSION'" bash -c "[ \"\$('$T/prog-static')\" = 'libnkv $VERSION' ]"
else
	bad "cc prog.c \$(pkg-config --static --libs libnkv) with libnkv.a"; sed 's/^/#   /' "$T/cc2" | head -20
fi
finish
