/* SPDX-License-Identifier: Apache-2.0 */
/* shm_cuda.c - GPU memory for the shared-memory transport, through a dlopen'd CUDA runtime. */
#include "shm_cuda.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>

#include "common/log.h"

/* The few runtime entry points used, with the runtime's ABI: cudaIpcMemHandle_t is 64 opaque bytes
 * passed by value; cudaError_t is an int (0 = success). */
typedef struct {
	char reserved[64];
} ipc_handle_t;

enum { CUDA_IPC_LAZY_PEER = 1, CUDA_H2D = 1, CUDA_D2H = 2 };

static struct {
	int (*set_device)(int);
	int (*ipc_open)(void **, ipc_handle_t, unsigned);
	int (*ipc_close)(void *);
	int (*memcpy)(void *, const void *, size_t, int);
	int (*sync)(void);
	const char *(*error_string)(int);
	int (*mem_range)(uint64_t *, size_t *, uint64_t); /* driver: cuMemGetAddressRange_v2 */
	bool ok;
} g_rt;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void load(void)
{
	static const char *const names[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0", "libcudart.so"};
	void *lib = NULL;

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && !lib; i++)
		lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		NKV_WARN("shm: GPU memory registration needs the CUDA runtime (libcudart), not found: %s", dlerror());
		return;
	}
	*(void **)&g_rt.set_device = dlsym(lib, "cudaSetDevice");
	*(void **)&g_rt.ipc_open = dlsym(lib, "cudaIpcOpenMemHandle");
	*(void **)&g_rt.ipc_close = dlsym(lib, "cudaIpcCloseMemHandle");
	*(void **)&g_rt.memcpy = dlsym(lib, "cudaMemcpy");
	*(void **)&g_rt.sync = dlsym(lib, "cudaDeviceSynchronize");
	*(void **)&g_rt.error_string = dlsym(lib, "cudaGetErrorString");
	/* The allocation's extent comes from the driver API (libcuda, which the runtime itself uses). */
	void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (drv)
		*(void **)&g_rt.mem_range = dlsym(drv, "cuMemGetAddressRange_v2");
	g_rt.ok = g_rt.set_device && g_rt.ipc_open && g_rt.ipc_close && g_rt.memcpy && g_rt.sync && g_rt.mem_range;
	if (!g_rt.ok)
		NKV_WARN("shm: GPU memory registration needs the CUDA runtime's IPC calls and the driver "
			 "(libcuda.so.1%s): not available", drv ? "" : ", not found");
	/* The library stays loaded for the process: regions may be registered again later. */
}

static const char *cuda_err(int e)
{
	return g_rt.error_string ? g_rt.error_string(e) : "CUDA error";
}

int nkv_cuda_open(int device, const uint8_t handle[64], void **base, uint64_t *size)
{
	ipc_handle_t h;
	uint64_t start;
	size_t len;
	int e;

	pthread_once(&g_once, load);
	if (!g_rt.ok)
		return -ENOTSUP;
	for (int i = 0; i < 64; i++)
		h.reserved[i] = (char)handle[i];
	if ((e = g_rt.set_device(device)) != 0 || (e = g_rt.ipc_open(base, h, CUDA_IPC_LAZY_PEER)) != 0) {
		NKV_WARN("shm: cannot open the CUDA IPC handle on device %d: %s", device, cuda_err(e));
		return -ENODEV;
	}
	if (g_rt.mem_range(&start, &len, (uint64_t)(uintptr_t)*base) != 0) {
		g_rt.ipc_close(*base);
		return -ENODEV;
	}
	*size = len - ((uint64_t)(uintptr_t)*base - start);
	return 0;
}

void nkv_cuda_close(int device, void *base)
{
	if (g_rt.ok && base && g_rt.set_device(device) == 0)
		g_rt.ipc_close(base);
}

int nkv_cuda_copy(int device, void *dst, const void *src, size_t n, bool to_gpu)
{
	int e;

	if (!g_rt.ok)
		return -ENOTSUP;
	/* The current device is per thread: set it each time (cheap when unchanged). */
	/* From pageable memory to the GPU, cudaMemcpy may return once the data is staged, before it lands:
	 * synchronise, so the CQE that follows never overtakes the data. */
	if ((e = g_rt.set_device(device)) != 0 || (e = g_rt.memcpy(dst, src, n, to_gpu ? CUDA_H2D : CUDA_D2H)) != 0 ||
	    (to_gpu && (e = g_rt.sync()) != 0)) {
		NKV_WARN("shm: cudaMemcpy of %zu bytes on device %d: %s", n, device, cuda_err(e));
		return -EIO;
	}
	return 0;
}
