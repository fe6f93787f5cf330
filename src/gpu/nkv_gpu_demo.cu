/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nkv-gpu-demo - GPU-initiated KV I/O against an shm target (rados-nkv --shm SOCK): a CUDA kernel
 * builds Store/Retrieve SQEs, reserves tickets, publishes a batch with one system-scope fence and one
 * SQ doorbell, and reaps its own completions (nkv_dev.h); no CPU thread is on the data path (the
 * CPU only launches kernels and reads the timings afterwards).
 *
 *   nkv-gpu-demo --sock PATH [--keys N] [--value-size BYTES] [--batch B] [--mem host|vram]
 *                [--seed S] [--nsid NSID] [--max-mem BYTES] [--ttl SECONDS|none] [--pin]
 *
 * Values are generated on the GPU by a seeded LFSR, stored, retrieved (into VRAM: with --mem host
 * the target writes pinned host memory mapped into the GPU and the verify kernel copies each value
 * into a VRAM buffer as it checks it; with --mem vram the buffers are cudaMalloc'd VRAM registered
 * with the target by CUDA IPC handle, so Store reads and Retrieve writes VRAM directly and the verify
 * kernel reads it in place), and verified on the GPU. A target that cannot use CUDA (-ENOTSUP) makes
 * --mem vram exit 77. Prints per-op latency (p50/p99, submit to completion as the GPU thread sees
 * it), batch latency and throughput, then one "RESULT key=value ..." line for scripts.
 * --ttl / --pin (a cache namespace): the kernel stores with Store TTL (F1h, nkv_dev_sqe_store_ttl)
 * instead of Store; a TTL shorter than the run makes the retrieves of expired keys fail (87h).
 * Exit 0 only when every value verified.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include <cuda_runtime.h>

#include "gpu/nkv_gpu.h"

#define CU(x)                                                                                      \
	do {                                                                                       \
		cudaError_t e_ = (x);                                                              \
		if (e_ != cudaSuccess) {                                                           \
			fprintf(stderr, "nkv-gpu-demo: %s: %s\n", #x, cudaGetErrorString(e_));     \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

#define BUDGET 400000000ull /* polls (each with a __nanosleep): tens of seconds, never forever */

__device__ static inline uint64_t gtime(void)
{
	uint64_t t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

/** Word @w of key @k's value: a 32-bit Galois LFSR seeded from (seed, key, word). */
__device__ static inline uint32_t lfsr_word(uint32_t seed, uint32_t k, uint32_t w)
{
	uint32_t x = seed ^ (k * 2654435761u) ^ (w * 0x9e3779b9u);
	if (!x)
		x = 1;
	for (int i = 0; i < 8; i++)
		x = (x >> 1) ^ ((0u - (x & 1u)) & 0xd0000001u);
	return x;
}

__device__ static inline void key_of(uint32_t k, uint8_t key[16], unsigned *klen)
{
	const char *hex = "0123456789abcdef";
	key[0] = 'g', key[1] = 'p', key[2] = 'u', key[3] = '-';
	for (int i = 0; i < 8; i++)
		key[4 + i] = (uint8_t)hex[(k >> (28 - 4 * i)) & 0xf];
	*klen = 12;
}

/** Fill @n buffers of @len bytes (keys key0..) with their values. */
__global__ void gen_kernel(uint32_t *buf, uint32_t len, uint32_t n, uint32_t key0, uint32_t seed)
{
	uint64_t words = (uint64_t)n * (len / 4);
	uint32_t wpb = len / 4;
	for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < words; i += (uint64_t)gridDim.x * blockDim.x)
		buf[i] = lfsr_word(seed, key0 + (uint32_t)(i / wpb), (uint32_t)(i % wpb));
}

/** Check @n retrieved values; copy them into VRAM @dst when it is not @buf. Counts bad words. */
__global__ void verify_kernel(const uint32_t *buf, uint32_t *dst, uint32_t len, uint32_t n, uint32_t key0,
			      uint32_t seed, unsigned long long *bad)
{
	uint64_t words = (uint64_t)n * (len / 4);
	uint32_t wpb = len / 4;
	unsigned long long mine = 0;
	for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < words; i += (uint64_t)gridDim.x * blockDim.x) {
		uint32_t v = buf[i];
		if (dst != buf)
			dst[i] = v;
		if (v != lfsr_word(seed, key0 + (uint32_t)(i / wpb), (uint32_t)(i % wpb)))
			mine++;
	}
	if (mine)
		atomicAdd(bad, mine);
}

/**
 * One batch from one block: thread 0 reserves blockDim.x tickets, every thread writes its SQE into
 * its slot, thread 0 publishes them (one fence, one doorbell), every thread reaps its completion.
 */
__global__ void kv_batch_kernel(struct nkv_dev_qp *qp, const uint64_t *prp, uint8_t opc, uint32_t nsid, uint32_t key0,
				uint32_t len, uint32_t ttl_s, uint32_t ttl_flags, uint64_t *lat, uint32_t *st)
{
	__shared__ uint32_t t0;
	__shared__ int rc;
	uint32_t i = threadIdx.x, n = blockDim.x;
	uint8_t key[16];
	unsigned klen;
	struct nkv_sqe s;
	struct nkv_dev_cpl c;

	key_of(key0 + i, key, &klen);
	if (opc == NKV_VS_STORE_TTL)
		nkv_dev_sqe_store_ttl(&s, nsid, key, klen, len, 0, ttl_s, ttl_flags, prp[2 * i], prp[2 * i + 1]);
	else
		nkv_dev_sqe_kv(&s, opc, nsid, key, klen, len, prp[2 * i], prp[2 * i + 1]);
	if (i == 0)
		rc = nkv_dev_reserve(qp, n, BUDGET, &t0);
	__syncthreads();
	if (rc) {
		st[i] = 0x10000u | (uint32_t)-rc;
		return;
	}
	uint64_t start = gtime();
	int prc = nkv_dev_put(qp, t0 + i, &s, BUDGET);
	__syncthreads(); /* every SQE of the batch written (each with its own release fence) */
	if (i == 0 && nkv_dev_publish(qp, t0, n, BUDGET))
		prc = -1;
	int wrc = nkv_dev_wait(qp, t0 + i, &c, BUDGET);
	lat[i] = gtime() - start;
	if (prc < 0 || wrc)
		st[i] = 0x20000u | (uint32_t)(wrc ? -wrc : 1);
	else if (opc == NKV_KV_RETRIEVE && c.status == 0 && c.dw0 != len)
		st[i] = 0x30000u;
	else if (opc == NKV_KV_RETRIEVE)
		st[i] = nkv_dev_retrieve_status(qp, &c, 0, len); /* the bytes moved, not only the size */
	else
		st[i] = c.status;
}

static double pct(std::vector<double> &v, double p)
{
	if (v.empty())
		return 0;
	std::sort(v.begin(), v.end());
	size_t k = (size_t)(p * (double)(v.size() - 1));
	return v[k];
}

static void usage(void)
{
	fprintf(stderr, "usage: nkv-gpu-demo --sock PATH [--keys N] [--value-size BYTES] [--batch B] [--mem host|vram]\n"
			"                    [--seed S] [--nsid NSID] [--max-mem BYTES] [--ttl SECONDS|none] [--pin]\n"
			"                    [--version]\n");
	exit(64);
}

int main(int argc, char **argv)
{
	const char *sock = NULL, *mem = "host";
	uint32_t keys = 1024, vlen = 4096, batch = 32, seed = 0x1badb002u, nsid = 1;
	uint64_t max_mem = 2ull << 30;
	uint32_t ttl_s = 0, ttl_flags = 0;
	bool ttl = false; /* --ttl or --pin: stores go as Store TTL (F1h) */
	char *end;
	static const struct option lo[] = {{"sock", 1, 0, 's'},  {"keys", 1, 0, 'n'}, {"value-size", 1, 0, 'v'},
					   {"batch", 1, 0, 'b'}, {"mem", 1, 0, 'm'},  {"seed", 1, 0, 'S'},
					   {"nsid", 1, 0, 'N'},  {"max-mem", 1, 0, 'M'}, {"version", 0, 0, 'V'},
					   {"ttl", 1, 0, 'T'},   {"pin", 0, 0, 'P'},      {0, 0, 0, 0}};
	int o;
	while ((o = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (o) {
		case 's': sock = optarg; break;
		case 'n': keys = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'v': vlen = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'b': batch = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'm': mem = optarg; break;
		case 'S': seed = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'N': nsid = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'M': max_mem = strtoull(optarg, NULL, 0); break;
		case 'T':
			ttl = true;
			if (!strcmp(optarg, "none")) {
				ttl_s = NKV_TTL_NONE;
				break;
			}
			errno = 0;
			ttl_s = (uint32_t)strtoul(optarg, &end, 10);
			if (errno || end == optarg || *end || optarg[0] == '-' || strtoull(optarg, NULL, 10) >= NKV_TTL_NONE) {
				fprintf(stderr, "nkv-gpu-demo: bad --ttl '%s' (seconds, or none)\n", optarg);
				return 64;
			}
			break;
		case 'P': ttl = true; ttl_flags = NKV_TTL_PIN; break;
		/* nkv_version(), not nkv_version.h: gpu_build.sh compiles these sources without the build tree */
		case 'V': printf("nkv-gpu-demo %s\n", nkv_version()); return 0;
		default: usage();
		}
	}
	unsigned mode = !strcmp(mem, "host") ? NKV_GPU_MEM_HOST : !strcmp(mem, "vram") ? NKV_GPU_MEM_VRAM : 0;
	if (!sock || !keys || !batch || batch > 1024 || vlen < 4 || vlen % 4 || !mode)
		usage();
	/* the batch's buffers must fit in max_mem */
	uint32_t eff = std::min(batch, keys);
	while (eff > 1 && (uint64_t)eff * vlen > max_mem)
		eff /= 2;

	struct nkv_gpu *g;
	struct nkv_gpu_qp *q;
	struct nkv_gpu_buf *b;
	int rc;
	if ((rc = nkv_gpu_open(sock, &g))) {
		fprintf(stderr, "nkv-gpu-demo: connect %s: %s\n", sock, strerror(-rc));
		return 1;
	}
	uint32_t entries = 2;
	while (entries < 2 * eff)
		entries *= 2;
	if ((rc = nkv_gpu_qp_create(g, entries, &q))) {
		fprintf(stderr, "nkv-gpu-demo: queue of %u: %s\n", entries, strerror(-rc));
		return 1;
	}
	if (q->size <= eff)
		eff = q->size / 2;
	if ((rc = nkv_gpu_buf_alloc(g, eff, vlen, mode, &b))) {
		fprintf(stderr, "nkv-gpu-demo: %s buffers (%u x %u bytes): %s\n", mem, eff, vlen, strerror(-rc));
		printf("RESULT mem=%s vsize=%u batch=%u keys=%u status=unsupported\n", mem, vlen, batch, keys);
		return rc == -ENOTSUP ? 77 : 1;
	}
	uint32_t *vram = NULL; /* where retrieved values end up in GPU memory */
	if (mode == NKV_GPU_MEM_HOST)
		CU(cudaMalloc((void **)&vram, (size_t)eff * vlen));
	else
		vram = (uint32_t *)b->dev;
	uint64_t *d_lat;
	uint32_t *d_st;
	unsigned long long *d_bad, bad = 0;
	CU(cudaMalloc((void **)&d_lat, 8 * (size_t)eff));
	CU(cudaMalloc((void **)&d_st, 4 * (size_t)eff));
	CU(cudaMalloc((void **)&d_bad, sizeof(*d_bad)));
	CU(cudaMemset(d_bad, 0, sizeof(*d_bad)));
	cudaEvent_t e0, e1, e2;
	CU(cudaEventCreate(&e0));
	CU(cudaEventCreate(&e1));
	CU(cudaEventCreate(&e2));

	std::vector<double> lat[2], blat[2];
	double ktime[2] = {0, 0}, vtime = 0;
	std::vector<uint64_t> hl(eff);
	std::vector<uint32_t> hs(eff);
	unsigned failed = 0;
	for (int ph = 0; ph < 2; ph++) {
		uint8_t opc = ph == 1 ? NKV_KV_RETRIEVE : ttl ? NKV_VS_STORE_TTL : NKV_KV_STORE;
		for (uint32_t k0 = 0; k0 < keys; k0 += eff) {
			uint32_t n = std::min(eff, keys - k0);
			if (ph == 0)
				gen_kernel<<<264, 256>>>((uint32_t *)b->dev, vlen, n, k0, seed);
			else
				CU(cudaMemset(b->dev, 0, (size_t)n * vlen)); /* nothing stale can pass the check */
			CU(cudaEventRecord(e0));
			kv_batch_kernel<<<1, n>>>(q->d_qp, b->d_prp, opc, nsid, k0, vlen, ttl_s, ttl_flags, d_lat, d_st);
			CU(cudaEventRecord(e1));
			if (ph == 1)
				verify_kernel<<<264, 256>>>((const uint32_t *)b->dev, vram, vlen, n, k0, seed, d_bad);
			CU(cudaEventRecord(e2));
			CU(cudaEventSynchronize(e2));
			float ms, vms;
			CU(cudaEventElapsedTime(&ms, e0, e1));
			CU(cudaEventElapsedTime(&vms, e1, e2));
			ktime[ph] += ms / 1e3;
			if (ph == 1)
				vtime += vms / 1e3;
			blat[ph].push_back(ms * 1e3);
			CU(cudaMemcpy(hl.data(), d_lat, 8 * (size_t)n, cudaMemcpyDeviceToHost));
			CU(cudaMemcpy(hs.data(), d_st, 4 * (size_t)n, cudaMemcpyDeviceToHost));
			for (uint32_t i = 0; i < n; i++) {
				lat[ph].push_back(hl[i] / 1e3);
				if (hs[i]) {
					if (failed++ < 10)
						fprintf(stderr, "nkv-gpu-demo: %s key %u: status %#x\n", ph ? "retrieve" : "store",
							k0 + i, hs[i]);
				}
			}
		}
	}
	CU(cudaMemcpy(&bad, d_bad, sizeof(bad), cudaMemcpyDeviceToHost));
	double bytes = (double)keys * vlen;
	printf("nkv-gpu-demo: %u keys x %u bytes, batch %u (asked %u), queue %u entries, data in %s memory\n", keys, vlen,
	       eff, batch, q->size, mem);
	for (int ph = 0; ph < 2; ph++)
		printf("  %-8s per-op p50 %.1f us p99 %.1f us | batch p50 %.1f us | %.0f keys/s %.2f GB/s\n",
		       ph ? "retrieve" : "store", pct(lat[ph], 0.5), pct(lat[ph], 0.99), pct(blat[ph], 0.5), keys / ktime[ph],
		       bytes / ktime[ph] / 1e9);
	/* GB/s into VRAM: vram mode, the Retrieve batches alone (the target writes VRAM); host mode, the
	 * Retrieve batches plus the verify kernel that copies the values from pinned host memory. */
	double into_vram = bytes / (ktime[1] + (mode == NKV_GPU_MEM_HOST ? vtime : 0)) / 1e9;
	printf("  verified %u values on the GPU: %llu bad words, %u failed commands; into VRAM %.2f GB/s\n", keys, bad,
	       failed, into_vram);
	printf("RESULT mem=%s vsize=%u batch=%u keys=%u store_p50_us=%.1f store_keys_s=%.0f retr_p50_us=%.1f "
	       "retr_keys_s=%.0f vram_GBps=%.2f bad_words=%llu failed=%u status=%s\n",
	       mem, vlen, eff, keys, pct(lat[0], 0.5), keys / ktime[0], pct(lat[1], 0.5), keys / ktime[1], into_vram, bad,
	       failed, bad || failed ? "FAIL" : "ok");
	if (mode == NKV_GPU_MEM_HOST)
		cudaFree(vram);
	nkv_gpu_buf_free(g, b);
	nkv_gpu_qp_destroy(q);
	nkv_gpu_close(g);
	return bad || failed ? 1 : 0;
}
