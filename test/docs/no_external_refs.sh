#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# no_external_refs.sh - the documentation a user needs is in the repository.
#
# Usage: no_external_refs.sh [SOURCE_DIR]   (default: the repository this script is in)
#
# Fails (exit 1, one line per finding) when a tracked file
#  - names a document that is not part of the repository: a path into ../shared or shared/docs,
#    DESIGN.md or "DESIGN section N", "the wire doc", linux-host-facts.md, integrations.md
#    (the repository's own documents are docs/design.md and docs/nvme-kv-wire.md);
#  - mentions docs/NAME.md where no such file exists;
#  - or, in README.md and docs/*.md, has a relative Markdown link whose target (anchor removed) does
#    not exist in the repository.
# Tracked files come from `git ls-files`; outside a git checkout every file under SOURCE_DIR except
# build/ and .git/ is read. This script itself is not scanned (it has to spell the names out).
set -u

root=$(cd "${1:-$(dirname "$0")/../..}" && pwd) || exit 2
self=test/docs/no_external_refs.sh
cd "$root" || exit 2

if git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	mapfile -t files < <(git ls-files)
else
	mapfile -t files < <(find . -path ./build -prune -o -path ./.git -prune -o -type f -print | sed 's|^\./||')
fi

fail=0
report() {
	printf '%s\n' "$*"
	fail=1
}

# 1. Names of documents that exist only outside the repository. Binary files are skipped (-I).
pattern='\.\./shared|shared/docs|DESIGN\.md|DESIGN section|[Ww]ire doc([^a-zA-Z]|$)|linux-host-facts|(^|[^/a-zA-Z])integrations\.md'
# inside docs/, "integrations.md" is the sibling page docs/integrations.md (its links are checked below)
docs_pattern='\.\./shared|shared/docs|DESIGN\.md|DESIGN section|[Ww]ire doc([^a-zA-Z]|$)|linux-host-facts'
texts=()
for f in "${files[@]}"; do
	[ "$f" = "$self" ] && continue
	[ -f "$f" ] && texts+=("$f")
done
if [ ${#texts[@]} -gt 0 ]; then
	while IFS= read -r hit; do
		case "$hit" in
		docs/*) grep -q -E -- "$docs_pattern" <<<"${hit#*:*:}" || continue ;;
		esac
		report "external document: $hit"
	done < <(printf '%s\0' "${texts[@]}" | xargs -0 grep -n -I -E -- "$pattern" 2>/dev/null)
fi

# 2. docs/NAME.md mentioned anywhere must exist.
if [ ${#texts[@]} -gt 0 ]; then
	while IFS= read -r hit; do
		file=${hit%%:*}
		rest=${hit#*:}
		line=${rest%%:*}
		target=${rest#*:}
		[ -f "$target" ] || report "$file:$line: $target does not exist"
	done < <(printf '%s\0' "${texts[@]}" | xargs -0 grep -n -o -I -E -- '(^|[^A-Za-z0-9_./-])docs/[A-Za-z0-9_.-]+\.md' 2>/dev/null |
		sed -E 's/^([^:]*:[0-9]+:)[^d]*/\1/')
fi

# 3. Relative Markdown links in README.md and docs/*.md: [text](target) and [label]: target.
for f in "${files[@]}"; do
	case "$f" in
	README.md | docs/*.md) ;;
	*) continue ;;
	esac
	[ -f "$f" ] || continue
	dir=$(dirname "$f")
	# Leave fenced code blocks out: they show commands and code, not links.
	while IFS=$'\t' read -r line target; do
		target=${target%%#*}
		target=${target%% *}
		[ -z "$target" ] && continue # a link to an anchor in the same file
		case "$target" in
		http://* | https://* | mailto:* | ftp://*) continue ;;
		/*) path=".$target" ;;
		*) path="$dir/$target" ;;
		esac
		[ -e "$path" ] || report "$f:$line: link target $target does not exist"
	done < <(awk '
		/^[ \t]*```/ { fence = !fence; next }
		fence { next }
		{
			s = $0
			while (match(s, /\]\([^)]*\)/)) {
				printf "%d\t%s\n", NR, substr(s, RSTART + 2, RLENGTH - 3)
				s = substr(s, RSTART + RLENGTH)
			}
			if (match($0, /^[ \t]*\[[^]]+\]:[ \t]+[^ \t]+/)) {
				t = $0
				sub(/^[ \t]*\[[^]]+\]:[ \t]+/, "", t)
				sub(/[ \t].*$/, "", t)
				printf "%d\t%s\n", NR, t
			}
		}' "$f")
done

if [ "$fail" -ne 0 ]; then
	echo "no_external_refs: FAIL (point at docs/design.md or docs/nvme-kv-wire.md instead)"
	exit 1
fi
echo "no_external_refs: ok (${#files[@]} files)"
exit 0
