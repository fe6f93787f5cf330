#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# spdx.sh - every source file of the project names its license (LICENSE, Apache-2.0) in an
# SPDX-License-Identifier line within its first 3 lines, so that a file copied out of the tree still
# says under which terms.
#
#   scripts/spdx.sh [SOURCE_DIR]         check: one line per file without it, exit 1 if any
#   scripts/spdx.sh --fix [SOURCE_DIR]   add the line to those files (after a #! line), then check
#
# Source files: C, C++, CUDA, headers, Python, shell, CMake, Makefile, proto, TOML, the configure_file
# templates (*.in) and extensionless scripts with a #! line. Tracked files come from `git ls-files`;
# outside a git checkout every file under SOURCE_DIR except build/ and .git/ is read. The CTest test
# license_spdx runs the check, so a file added without the line fails CI.
set -u
fix=0
if [ "${1:-}" = --fix ]; then
	fix=1
	shift
fi
root=$(cd "${1:-$(dirname "$0")/..}" && pwd) || exit 2
cd "$root" || exit 2
tag='SPDX-License-Identifier: Apache-2.0'

if git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	mapfile -t files < <(git ls-files)
else
	mapfile -t files < <(find . -path ./build -prune -o -path ./.git -prune -o -type f -print | sed 's|^\./||')
fi

# The comment that carries the tag in FILE's language; nothing for files that are not source.
comment_for() {
	case "$1" in
	*.c | *.h | *.cc | *.cpp | *.cu | *.cuh | *.h.in) echo "/* $tag */" ;;
	*.proto) echo "// $tag" ;;
	*.py | *.sh | *.cmake | */CMakeLists.txt | CMakeLists.txt | Makefile | */Makefile | *.toml | *.pc.in | \
		*.service.in) echo "# $tag" ;;
	test/fuzz/corpus*/* | *.md | *.json | *.jsonl | *.txt | *.png) ;;
	*) [ -f "$1" ] && head -c 2 "$1" 2>/dev/null | grep -q '^#!' && echo "# $tag" ;;
	esac
}

missing=0 fixed=0 checked=0
for f in "${files[@]}"; do
	[ -f "$f" ] || continue
	c=$(comment_for "$f") || true
	[ -n "$c" ] || continue
	checked=$((checked + 1))
	head -n 3 "$f" | grep -qF "$tag" && continue
	if [ "$fix" = 1 ]; then
		if head -n 1 "$f" | grep -q '^#!'; then
			{ head -n 1 "$f"; echo "$c"; tail -n +2 "$f"; } >"$f.spdx.tmp"
		else
			{ echo "$c"; cat "$f"; } >"$f.spdx.tmp"
		fi
		chmod --reference="$f" "$f.spdx.tmp" && mv "$f.spdx.tmp" "$f"
		fixed=$((fixed + 1))
		continue
	fi
	echo "$f: no '$tag' line in its first 3 lines (scripts/spdx.sh --fix adds it)"
	missing=$((missing + 1))
done
[ "$fix" = 1 ] && echo "spdx: added the line to $fixed file(s)"
# The license itself, and the Python package's metadata that names it.
if ! [ -f LICENSE ] || ! grep -q 'Apache License' LICENSE || ! grep -q 'Version 2.0, January 2004' LICENSE; then
	echo "LICENSE: missing, or not the Apache License 2.0 text"
	missing=$((missing + 1))
fi
if [ -f python/pyproject.toml ] && ! grep -qE '^license = \{text = "Apache-2.0"\}' python/pyproject.toml; then
	echo "python/pyproject.toml: its license is not {text = \"Apache-2.0\"}"
	missing=$((missing + 1))
fi
if [ "$missing" -ne 0 ]; then
	echo "spdx: FAIL ($missing finding(s); $checked source files checked)"
	exit 1
fi
echo "spdx: ok ($checked source files)"
