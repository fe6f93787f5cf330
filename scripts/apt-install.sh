#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# apt-install.sh LABEL PKG... - install the Debian packages among PKG that are missing, with one
# `apt-get update` only when something is missing; already-present packages cost a dpkg query each.
# Shared by scripts/deps.sh, scripts/bench-deps.sh and test/interop/prepare.sh.
set -euo pipefail
label=$1
shift
missing=()
for p in "$@"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "$label: all $# packages present"
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "$label: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
