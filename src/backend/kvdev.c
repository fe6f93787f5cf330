/* kvdev.c - backend registry and the completion hop shared by every backend. */
#include "kvdev.h"

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
