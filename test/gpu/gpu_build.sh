#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpu_build: the CUDA sources (src/gpu/*.cu, and nkv_dev.h's device paths through them) compile with
# nvcc. A build-only check: 77 (skipped) where nvcc is absent, as on CI.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
nvcc=${NVCC:-$(command -v nvcc || true)}
[ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
if [ -z "$nvcc" ]; then
	echo "gpu_build: nvcc not found: skipped"
	exit 77
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
arch=${NKV_CUDA_ARCH:-sm_90}
for f in "$src"/src/gpu/*.cu; do
	echo "gpu_build: $nvcc -arch=$arch $(basename "$f")"
	"$nvcc" -arch="$arch" -std=c++17 -Xcompiler=-Wall,-Wextra,-Werror -I"$src/include" -I"$src/src" \
		-c "$f" -o "$out/$(basename "$f").o"
done
echo "gpu_build: ok"
