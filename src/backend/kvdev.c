/* SPDX-License-Identifier: Apache-2.0 */
/* kvdev.c - backend registry and the completion hop shared by every backend. */
#include "kvdev.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

static const struct nkv_kvdev_ops *const g_backends[] = {
	&nkv_kvdev_mem,
#ifdef NKV_HAVE_RADOS
	&nkv_kvdev_rados,
#endif
};

const struct nkv_kvdev_ops *nkv_kvdev_find(const char *name)
{
	for (size_t i = 0; i < sizeof(g_backends) / sizeof(g_backends[0]); i++)
		if (name && strcmp(g_backends[i]->name, name) == 0)
			return g_backends[i];
	return NULL;
}

static void run_done(struct nkv_msg *m)
{
	struct nkv_kvio *io = (struct nkv_kvio *)((char *)m - offsetof(struct nkv_kvio, msg));
	io->done(io);
}

void nkv_kvio_complete(struct nkv_kvio *io, int rc)
{
	io->rc = rc;
	nkv_msgq_send(io->msgq, &io->msg, run_done);
}

static void run_progress(struct nkv_msg *m)
{
	struct nkv_kvio *io = (struct nkv_kvio *)((char *)m - offsetof(struct nkv_kvio, prog_msg));
	/* Cleared first: a report landing while progress runs queues a new message, not a lost one. */
	atomic_store_explicit(&io->prog_queued, false, memory_order_seq_cst);
	io->progress(io);
}

void nkv_kvio_progress(struct nkv_kvio *io, uint32_t bytes)
{
	if (!io->progress)
		return;
	/* Only forward: two backend threads may report out of order. */
	uint32_t cur = atomic_load_explicit(&io->ready, memory_order_relaxed);
	while (cur < bytes && !atomic_compare_exchange_weak_explicit(&io->ready, &cur, bytes, memory_order_release,
								    memory_order_relaxed))
		;
	if (cur >= bytes)
		return;
	if (!atomic_exchange_explicit(&io->prog_queued, true, memory_order_seq_cst))
		nkv_msgq_send(io->msgq, &io->prog_msg, run_progress);
}

/* The largest reply a backend thread sends itself: a 4 MiB one would hold the backend's callback
 * thread (librados has one per cluster handle, shared by every reactor) for about a millisecond,
 * to save a wake-up worth about 1 % of such a command. */
#define DIRECT_XFER_MAX (256u << 10)

void nkv_kvio_complete_direct(struct nkv_kvio *io, int rc)
{
	if (io->xfer > DIRECT_XFER_MAX) {
		nkv_kvio_complete(io, rc);
		return;
	}
	io->rc = rc;
	nkv_msgq_send_or_run(io->msgq, &io->msg, run_done);
}

/* Layout: "NKM1", flags (u32), expiry, stored, tag, size (u64), all little-endian; "NKM2" adds the
 * block hash (u64) at 40. A record without a hash stays "NKM1", as gateways before the hash wrote it,
 * so records of both kinds are read and compared alike. */
size_t nkv_meta_encode(const struct nkv_meta *m, uint8_t out[NKV_META_MAX])
{
	bool hash = m->flags & NKV_META_HASH;

	memcpy(out, hash ? "NKM2" : "NKM1", 4);
	nkv_put32(out + 4, m->flags);
	nkv_put64(out + 8, m->expiry_ms);
	nkv_put64(out + 16, m->stored_ms);
	nkv_put64(out + 24, m->tag);
	nkv_put64(out + 32, m->size);
	if (!hash)
		return NKV_META_LEN;
	nkv_put64(out + 40, m->block_hash);
	return NKV_META_MAX;
}

int nkv_meta_decode(const void *in, size_t len, struct nkv_meta *m)
{
	const uint8_t *p = in;
	bool v1 = len == NKV_META_LEN && memcmp(p, "NKM1", 4) == 0;
	bool v2 = len == NKV_META_MAX && memcmp(p, "NKM2", 4) == 0;

	if (!v1 && !v2)
		return -EINVAL;
	m->flags = nkv_get32(p + 4);
	/* The hash flag says which layout: one that contradicts it is not a record of ours. */
	if (v2 != !!(m->flags & NKV_META_HASH))
		return -EINVAL;
	m->expiry_ms = nkv_get64(p + 8);
	m->stored_ms = nkv_get64(p + 16);
	m->tag = nkv_get64(p + 24);
	m->size = nkv_get64(p + 32);
	m->block_hash = v2 ? nkv_get64(p + 40) : 0;
	return 0;
}
