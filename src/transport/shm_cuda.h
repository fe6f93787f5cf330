/* SPDX-License-Identifier: Apache-2.0 */
/*
 * shm_cuda.h - the shared-memory transport's access to GPU memory registered by CUDA IPC handle.
 * The CUDA runtime is loaded with dlopen the first time a GPU region is registered, so the daemon
 * builds and runs on machines without CUDA; there, registration answers -ENOTSUP.
 */
#ifndef NKV_SHM_CUDA_H
#define NKV_SHM_CUDA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/**
 * Open the allocation named by @handle on @device. @return 0 with *@base and its size in *@size
 * (from the driver, so a registration can be bounds checked), -ENOTSUP (no CUDA runtime), -ENODEV.
 */
int nkv_cuda_open(int device, const uint8_t handle[64], void **base, uint64_t *size);

/** Close what nkv_cuda_open opened. */
void nkv_cuda_close(int device, void *base);

/**
 * Copy @n bytes between host memory and GPU memory on @device (@to_gpu: host -> GPU).
 * Synchronous (cudaMemcpy on the legacy stream). @return 0 or -EIO.
 */
int nkv_cuda_copy(int device, void *dst, const void *src, size_t n, bool to_gpu);

#endif
