#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpu-check.sh - the one prepared check for a GPU machine (an NVIDIA H200; no Ceph there): build,
# run the CPU-emulated queue test and the CUDA build check, start rados-nkv with the mem backend and
# the shared-memory transport, then run nkv-gpu-demo for values of 4 KiB, 256 KiB and 32 MiB, batch
# sizes 1, 32 and 1024, data in host memory and in VRAM (cudaMalloc'd, registered with the target by
# CUDA IPC handle: Retrieve writes it directly, Store reads it). Every value is verified on the GPU.
# Prints a table of p50 per-op latency, keys/s and GB/s into VRAM (vram rows: the Retrieve batches
# alone; host rows: Retrieve plus the kernel copying pinned host memory into VRAM). Budget: well
# inside 5 minutes.
#
#   scripts/gpu-check.sh            (BUILD=dir to choose the build dir; ARCH=90 the CUDA arch)
# Exit 0 when every run passed. A vram run the target cannot serve (demo exit 77: the daemon found
# no CUDA runtime/driver to dlopen) is a failure here: this script exists to check it.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build/gpu-check}
ARCH=${ARCH:-90}
export PATH=$PATH:/usr/local/cuda/bin
T0=$SECONDS

echo "== build ($BUILD)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || echo "nvidia-smi failed"
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$ARCH" >"$BUILD.cmake.log" 2>&1 ||
	{ tail -30 "$BUILD.cmake.log"; exit 1; }
cmake --build "$BUILD" -j"$(nproc)" --target rados-nkv nkv-gpu-demo dev_func >"$BUILD.build.log" 2>&1 ||
	{ tail -40 "$BUILD.build.log"; exit 1; }
echo "built in $((SECONDS - T0)) s"

echo "== CPU emulation (dev_func) and CUDA build check"
timeout 120 "$BUILD/test/dev_func" | grep -E "^(ticket|batch|torn|bounded|cuda) |passed" || echo "dev_func FAILED"
timeout 300 bash "$ROOT/test/gpu/gpu_build.sh" >/dev/null 2>&1 && echo "gpu_build ok" || echo "gpu_build FAILED"

DIR=$(mktemp -d /tmp/gpu-check.XXXXXX)
SOCK=$DIR/shm.sock
# The daemon dlopens libcudart (and libcuda.so.1) on the first VRAM registration: let it find the
# toolkit's runtime even where ld.so.conf does not list it.
CUDA_LIB=
NVCC=$(command -v nvcc || true)
for d in ${NVCC:+"$(dirname "$(readlink -f "$NVCC")")/../lib64"} /usr/local/cuda/lib64; do
	[ -e "$d/libcudart.so" ] || ls "$d"/libcudart.so.* >/dev/null 2>&1 && CUDA_LIB=$CUDA_LIB$d:
done
LD_LIBRARY_PATH=$CUDA_LIB${LD_LIBRARY_PATH:-} "$BUILD/rados-nkv" --backend mem --listen 127.0.0.1:14420 --discovery none --shm "$SOCK" --shm-poll-us 5 \
	--shm-pollers 2 --ns 1::64M >"$DIR/daemon.log" 2>&1 &
DPID=$!
trap 'kill $DPID 2>/dev/null; wait $DPID 2>/dev/null; rm -rf "$DIR"' EXIT
for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.1; done
[ -S "$SOCK" ] || { echo "daemon did not start:"; cat "$DIR/daemon.log"; exit 1; }

echo "== nkv-gpu-demo"
printf "%-5s %-9s %-6s %-6s | %-12s %-12s | %-12s %-12s %-10s | %s\n" mem value batch keys "store p50us" "store keys/s" \
	"retr p50us" "retr keys/s" "GB/s VRAM" status
fail=0
seed=1
for mem in host vram; do
	for vs in 4096 262144 33554432; do
		case $vs in 4096) keys=4096 ;; 262144) keys=1024 ;; *) keys=32 ;; esac
		for b in 1 32 1024; do
			k=$keys
			[ "$b" = 1 ] && [ "$vs" != 33554432 ] && k=256 # batch 1 is latency-bound: fewer keys
			seed=$((seed + 1))
			out=$(timeout 60 "$BUILD/src/gpu/nkv-gpu-demo" --sock "$SOCK" --keys "$k" --value-size "$vs" --batch "$b" \
				--mem "$mem" --seed "$seed" 2>"$DIR/demo.err")
			rc=$?
			line=$(grep '^RESULT' <<<"$out")
			get() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$line"; }
			if [ "$rc" = 77 ]; then
				printf "%-5s %-9s %-6s %-6s | %-12s %-12s | %-12s %-12s %-10s | %s\n" "$mem" "$vs" "$b" "$k" - - - - - \
					"FAIL unsupported ($(head -1 "$DIR/demo.err"))"
				fail=1
				continue
			fi
			[ "$rc" = 0 ] || { fail=1; sed 's/^/    /' "$DIR/demo.err" | head -5; }
			printf "%-5s %-9s %-6s %-6s | %-12s %-12s | %-12s %-12s %-10s | %s\n" "$mem" "$vs" "$(get batch)" "$k" \
				"$(get store_p50_us)" "$(get store_keys_s)" "$(get retr_p50_us)" "$(get retr_keys_s)" \
				"$(get vram_GBps)" "$([ "$rc" = 0 ] && echo ok || echo "FAIL rc=$rc $(get status)")"
		done
	done
done
echo "== done in $((SECONDS - T0)) s"
kill -0 $DPID 2>/dev/null || { echo "daemon died:"; tail -20 "$DIR/daemon.log"; fail=1; }
exit $fail
