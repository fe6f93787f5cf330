/*
 * rados.c - kvdev over librados: one RADOS object per key-value pair, named by the lowercase hex of
 * the key, in the pool's RADOS namespace. Each command is one compound op (DESIGN.md section 2).
 * Completions fire on librados threads: the callback reads the result, releases the completion and
 * the op, then hands the I/O back to its owner thread through io->msgq (as SPDK's bdev_rbd does).
 * Every op carries rados_osd_op_timeout, so a dead cluster completes commands with -ETIMEDOUT
 * (82h, DNR clear) instead of hanging them.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <rados/librados.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "kvdev.h"

/* Largest List answer kept in memory: 1 Mi keys (~17 MiB); a host pages past it. */
#define LIST_MAX_KEYS (1u << 20)

struct nkv_kvdev {
	rados_t cluster;
	uint64_t max_object;
	char fsid[40];
	/* List worker: namespace scans are blocking librados calls, kept off the owner threads. */
	pthread_t worker;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct nkv_kvio *head, *tail; /* queued Lists, linked through be_next */
	bool stop;
};

struct nkv_kvns {
	struct nkv_kvdev *dev;
	rados_ioctx_t ioctx;
	char name[512]; /* "pool/ns", for logs and the NGUID */
};

static int conf_set(rados_t c, const char *key, unsigned val)
{
	char v[16];
	snprintf(v, sizeof(v), "%u", val);
	int rc = rados_conf_set(c, key, v);
	if (rc < 0)
		NKV_ERR("rados: cannot set %s=%s: %s", key, v, strerror(-rc));
	return rc;
}

/* Parse a size printed by the mon ("134217728", "\"128M\"" or "128M"). 0 when not a size. */
static uint64_t parse_size(const char *s)
{
	char *end;
	while (*s == '"' || *s == ' ')
		s++;
	uint64_t v = strtoull(s, &end, 10);
	switch (*end) {
	case 'K': case 'k': return v << 10;
	case 'M': case 'm': return v << 20;
	case 'G': case 'g': return v << 30;
	default: return v;
	}
}

/*
 * The OSDs reject objects above osd_max_object_size with -EFBIG (mapped to 85h either way). Ask the
 * mon's central config (which falls back to the default; it does not see an OSD's own ceph.conf),
 * and also honour a value set in the client's ceph.conf: the smaller wins. Asking each OSD
 * (`tell osd.N config get`) would be exact but costs a round trip per OSD at start.
 */
static uint64_t query_max_object(rados_t c)
{
	const char *cmd[] = {"{\"prefix\": \"config get\", \"who\": \"osd\", \"key\": \"osd_max_object_size\"}"};
	char *out = NULL, *outs = NULL, local[64];
	size_t outlen = 0, outslen = 0;
	uint64_t best = 128ull << 20, v;

	if (rados_mon_command(c, cmd, 1, "", 0, &out, &outlen, &outs, &outslen) == 0 && out) {
		char tmp[64];
		snprintf(tmp, sizeof(tmp), "%.*s", (int)(outlen < 63 ? outlen : 63), out);
		if ((v = parse_size(tmp)) > 0)
			best = v;
	}
	rados_buffer_free(out);
	rados_buffer_free(outs);
	if (rados_conf_get(c, "osd_max_object_size", local, sizeof(local)) == 0 &&
	    (v = parse_size(local)) > 0 && v < best)
		best = v;
	return best;
}

static void *list_worker(void *arg);

static int rados_open(const struct nkv_backend_conf *conf, struct nkv_kvdev **out)
{
	struct nkv_kvdev *d = calloc(1, sizeof(*d));
	const char *id = conf->client_id && *conf->client_id ? conf->client_id : "admin";
	int rc;

	if (!d)
		return -ENOMEM;
	if ((rc = rados_create(&d->cluster, id)) < 0) {
		free(d);
		return rc;
	}
	if ((rc = rados_conf_read_file(d->cluster, conf->ceph_conf)) < 0) {
		NKV_ERR("rados: cannot read ceph conf %s: %s", conf->ceph_conf ? conf->ceph_conf : "(default)",
			strerror(-rc));
		goto fail;
	}
	if (conf->keyring && (rc = rados_conf_set(d->cluster, "keyring", conf->keyring)) < 0)
		goto fail;
	unsigned op_to = conf->op_timeout_s ? conf->op_timeout_s : 30;
	unsigned conn_to = conf->connect_timeout_s ? conf->connect_timeout_s : 15;
	if ((rc = conf_set(d->cluster, "rados_osd_op_timeout", op_to)) < 0 ||
	    (rc = conf_set(d->cluster, "rados_mon_op_timeout", op_to)) < 0 ||
	    (rc = conf_set(d->cluster, "client_mount_timeout", conn_to)) < 0)
		goto fail;
	if ((rc = rados_connect(d->cluster)) < 0) {
		NKV_ERR("rados: cannot connect to the cluster as client.%s within %u s: %s", id, conn_to,
			strerror(-rc));
		goto fail;
	}
	d->max_object = query_max_object(d->cluster);
	if (rados_cluster_fsid(d->cluster, d->fsid, sizeof(d->fsid)) < 0)
		d->fsid[0] = '\0';
	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->cond, NULL);
	if ((rc = -pthread_create(&d->worker, NULL, list_worker, d)) < 0) {
		pthread_mutex_destroy(&d->lock);
		pthread_cond_destroy(&d->cond);
		goto fail;
	}
	NKV_INFO("rados: connected as client.%s, fsid %s, osd max object size %" PRIu64, id, d->fsid,
		 d->max_object);
	*out = d;
	return 0;
fail:
	rados_shutdown(d->cluster);
	free(d);
	return rc;
}

static void rados_close(struct nkv_kvdev *d)
{
	pthread_mutex_lock(&d->lock);
	d->stop = true;
	pthread_cond_signal(&d->cond);
	pthread_mutex_unlock(&d->lock);
	pthread_join(d->worker, NULL);
	pthread_mutex_destroy(&d->lock);
	pthread_cond_destroy(&d->cond);
	rados_shutdown(d->cluster);
	free(d);
}

static int rados_ns_open(struct nkv_kvdev *d, const char *pool, const char *ns, struct nkv_kvns **out)
{
	struct nkv_kvns *h = calloc(1, sizeof(*h));
	int rc;

	if (!h)
		return -ENOMEM;
	if ((rc = rados_ioctx_create(d->cluster, pool, &h->ioctx)) < 0) {
		NKV_ERR("rados: cannot open pool '%s': %s", pool, strerror(-rc));
		free(h);
		return rc;
	}
	rados_ioctx_set_namespace(h->ioctx, ns);
	snprintf(h->name, sizeof(h->name), "%s/%s", pool, ns);
	h->dev = d;
	*out = h;
	return 0;
}

static void rados_ns_close(struct nkv_kvns *h)
{
	rados_aio_flush(h->ioctx);
	rados_ioctx_destroy(h->ioctx);
	free(h);
}

static int rados_ns_info(struct nkv_kvns *h, struct nkv_kvns_info *info)
{
	struct rados_pool_stat_t ps;
	struct rados_cluster_stat_t cs;

	memset(info, 0, sizeof(*info));
	info->max_object = h->dev->max_object;
	if (rados_ioctx_pool_stat(h->ioctx, &ps) == 0)
		info->used = ps.num_bytes;
	if (rados_cluster_stat(h->dev->cluster, &cs) == 0)
		info->capacity = cs.kb * 1024;
	nkv_id128(h->dev->fsid, h->name, info->id);
	return 0;
}

/* ---- I/O --------------------------------------------------------------------------------------- */

static void write_done(rados_completion_t c, void *arg)
{
	struct nkv_kvio *io = arg;
	int rc = rados_aio_get_return_value(c);

	rados_aio_release(c);
	rados_release_write_op(io->be_op);
	nkv_kvio_complete(io, rc < 0 ? rc : 0);
}

static void read_done(rados_completion_t c, void *arg)
{
	struct nkv_kvio *io = arg;
	int rc = rados_aio_get_return_value(c);

	rados_aio_release(c);
	rados_release_read_op(io->be_op);
	if (rc >= 0 && io->op == NKV_IO_RETRIEVE) {
		io->value_size = io->be_size;
		io->xfer = (uint32_t)io->be_read;
	}
	nkv_kvio_complete(io, rc < 0 ? rc : 0);
}

static int submit_write(struct nkv_kvns *h, struct nkv_kvio *io, const char *oid)
{
	rados_write_op_t op = rados_create_write_op();
	rados_completion_t c;
	int rc;

	if (!op)
		return -ENOMEM;
	if (io->op == NKV_IO_DELETE) {
		rados_write_op_remove(op);
	} else {
		if (io->flags & NKV_IO_MUST_NOT_EXIST)
			rados_write_op_create(op, LIBRADOS_CREATE_EXCLUSIVE, NULL);
		if (io->flags & NKV_IO_MUST_EXIST)
			rados_write_op_assert_exists(op);
		rados_write_op_write_full(op, io->len ? io->buf : "", io->len); /* 0 B: an empty object */
	}
	io->be_op = op;
	if ((rc = rados_aio_create_completion2(io, write_done, &c)) < 0) {
		rados_release_write_op(op);
		return rc;
	}
	/* FULL_TRY: on a full cluster or pool a Store fails with -ENOSPC/-EDQUOT (81h Capacity
	 * Exceeded) and a Delete goes through, instead of librados holding the op until space returns. */
	if ((rc = rados_aio_write_op_operate(op, h->ioctx, c, oid, NULL, LIBRADOS_OPERATION_FULL_TRY)) < 0) {
		rados_aio_release(c);
		rados_release_write_op(op);
	}
	return rc;
}

static int submit_read(struct nkv_kvns *h, struct nkv_kvio *io, const char *oid)
{
	rados_read_op_t op = rados_create_read_op();
	rados_completion_t c;
	int rc;

	if (!op)
		return -ENOMEM;
	io->be_size = 0;
	io->be_read = 0;
	if (io->op == NKV_IO_EXIST) {
		rados_read_op_assert_exists(op);
	} else {
		/* stat and read in one op: DW0 carries the full size even when the read is truncated. */
		rados_read_op_stat(op, &io->be_size, &io->be_mtime, &io->be_rval[0]);
		if (io->len)
			rados_read_op_read(op, 0, io->len, io->buf, &io->be_read, &io->be_rval[1]);
	}
	io->be_op = op;
	if ((rc = rados_aio_create_completion2(io, read_done, &c)) < 0) {
		rados_release_read_op(op);
		return rc;
	}
	if ((rc = rados_aio_read_op_operate(op, h->ioctx, c, oid, 0)) < 0) {
		rados_aio_release(c);
		rados_release_read_op(op);
	}
	return rc;
}

/* Scan the namespace keeping the K smallest keys >= the start key (DESIGN.md "List order"). */
static int do_list(struct nkv_kvns *h, struct nkv_kvio *io)
{
	struct nkv_keyheap heap;
	rados_list_ctx_t lc;
	const char *entry;
	size_t elen;
	uint32_t cap = nkv_list_capacity(io->len), nrk;
	int rc;

	if (cap > LIST_MAX_KEYS)
		cap = LIST_MAX_KEYS;
	if ((rc = nkv_keyheap_init(&heap, &io->key, cap)) < 0)
		return rc;
	if ((rc = rados_nobjects_list_open(h->ioctx, &lc)) < 0)
		goto out;
	while ((rc = rados_nobjects_list_next2(lc, &entry, NULL, NULL, &elen, NULL, NULL)) == 0) {
		struct nkv_key k;
		if (nkv_oid_to_key(entry, elen, &k) == 0)
			nkv_keyheap_offer(&heap, &k);
	}
	rados_nobjects_list_close(lc);
	if (rc == -ENOENT) { /* end of the listing */
		nkv_keyheap_sort(&heap);
		io->xfer = nkv_list_pack(io->buf, io->len, heap.v, heap.n, &nrk);
		rc = 0;
	}
out:
	nkv_keyheap_fini(&heap);
	return rc;
}

static void *list_worker(void *arg)
{
	struct nkv_kvdev *d = arg;

	pthread_mutex_lock(&d->lock);
	for (;;) {
		while (!d->head && !d->stop)
			pthread_cond_wait(&d->cond, &d->lock);
		if (!d->head)
			break; /* stop requested and queue drained */
		struct nkv_kvio *io = d->head;
		d->head = io->be_next;
		if (!d->head)
			d->tail = NULL;
		pthread_mutex_unlock(&d->lock);
		nkv_kvio_complete(io, do_list(io->be_ns, io));
		pthread_mutex_lock(&d->lock);
	}
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

static void rados_submit(struct nkv_kvns *h, struct nkv_kvio *io)
{
	char oid[NKV_OID_MAX];
	int rc;

	io->xfer = 0;
	io->value_size = 0;
	if (io->op == NKV_IO_LIST) {
		io->be_ns = h;
		io->be_next = NULL;
		pthread_mutex_lock(&h->dev->lock);
		if (h->dev->tail)
			h->dev->tail->be_next = io;
		else
			h->dev->head = io;
		h->dev->tail = io;
		pthread_cond_signal(&h->dev->cond);
		pthread_mutex_unlock(&h->dev->lock);
		return;
	}
	nkv_key_to_oid(&io->key, oid);
	if (io->op == NKV_IO_STORE || io->op == NKV_IO_DELETE)
		rc = submit_write(h, io, oid);
	else
		rc = submit_read(h, io, oid);
	if (rc < 0)
		nkv_kvio_complete(io, rc);
}

const struct nkv_kvdev_ops nkv_kvdev_rados = {
	.name = "rados",
	.open = rados_open,
	.close = rados_close,
	.ns_open = rados_ns_open,
	.ns_close = rados_ns_close,
	.ns_info = rados_ns_info,
	.submit = rados_submit,
};
