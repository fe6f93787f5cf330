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

static void put64(uint8_t *p, uint64_t v)
{
	for (unsigned i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/* Layout: "NKM1", flags (u32), expiry, stored, tag, size (u64), all little-endian. */
void nkv_meta_encode(const struct nkv_meta *m, uint8_t out[NKV_META_LEN])
{
	memcpy(out, "NKM1", 4);
	put64(out + 4, m->flags); /* 8 bytes written, the top 4 overwritten next */
	put64(out + 8, m->expiry_ms);
	put64(out + 16, m->stored_ms);
	put64(out + 24, m->tag);
	put64(out + 32, m->size);
}

int nkv_meta_decode(const void *in, size_t len, struct nkv_meta *m)
{
	const uint8_t *p = in;
	if (len != NKV_META_LEN || memcmp(p, "NKM1", 4) != 0)
		return -EINVAL;
	m->flags = (uint32_t)get64(p + 4);
	m->expiry_ms = get64(p + 8);
	m->stored_ms = get64(p + 16);
	m->tag = get64(p + 24);
	m->size = get64(p + 32);
	return 0;
}
