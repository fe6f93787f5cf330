/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rados_bench.c - the raw librados baseline for bench/compare.sh: the same workload engine, key
 * naming and value verification as `nkv bench` (tools/nkv/bench_engine.c), straight on librados aio
 * (rados_aio_write_full / rados_aio_read / rados_aio_stat / rados_aio_remove). Object name = lowercase
 * hex of the key, in RADOS namespace -N, exactly as rados-nkv names them, so both see the same objects.
 *
 *   rados_bench [-c CEPH_CONF] [-k KEYRING] [-i CLIENT_ID] [-p POOL] [-N RADOS_NS] [-o json] KEY=VALUE...
 *
 * One rados_t per process, one ioctx per worker; completions run on librados' finisher thread and are
 * handed to the worker through a locked list (the worker thread runs the engine's callbacks).
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <rados/librados.h>
#include <stdlib.h>
#include <string.h>

#include "bench_engine.h"

struct rb_io {
	struct bh_io *io;
	rados_completion_t comp;
	uint64_t size;
	time_t mtime;
	struct rb_io *next;
};

struct rb_ctx {
	rados_ioctx_t ioctx;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct rb_io *done;
	unsigned qd, inflight;
	struct rb_io *pool; /* qd descriptors */
	struct rb_io *free;
};

struct rb_arg {
	rados_t cluster;
	const char *pool, *ns;
};

static void *rb_init(void *arg, unsigned worker, unsigned qd)
{
	struct rb_arg *a = arg;
	struct rb_ctx *x = calloc(1, sizeof(*x));
	if (!x)
		return NULL;
	int rc = rados_ioctx_create(a->cluster, a->pool, &x->ioctx);
	if (rc) {
		fprintf(stderr, "rados_bench: worker %u: pool %s: %s\n", worker, a->pool, strerror(-rc));
		free(x);
		return NULL;
	}
	rados_ioctx_set_namespace(x->ioctx, a->ns);
	pthread_mutex_init(&x->mu, NULL);
	pthread_cond_init(&x->cv, NULL);
	x->qd = qd;
	x->pool = calloc(qd, sizeof(*x->pool));
	for (unsigned i = 0; i < qd; i++) {
		x->pool[i].next = x->free;
		x->free = &x->pool[i];
	}
	return x;
}

static void rb_fini(void *ctx)
{
	struct rb_ctx *x = ctx;
	rados_ioctx_destroy(x->ioctx);
	free(x->pool);
	free(x);
}

static void rb_cb(rados_completion_t c, void *arg)
{
	(void)c;
	struct rb_io *r = arg;
	struct rb_ctx *x = r->io->priv;
	pthread_mutex_lock(&x->mu);
	r->next = x->done;
	x->done = r;
	pthread_cond_signal(&x->cv);
	pthread_mutex_unlock(&x->mu);
}

static int rb_submit(void *ctx, struct bh_io *io)
{
	struct rb_ctx *x = ctx;
	struct rb_io *r = x->free;
	if (!r)
		return -EAGAIN;
	x->free = r->next;
	r->io = io;
	io->priv = x;
	int rc = rados_aio_create_completion2(r, rb_cb, &r->comp);
	if (rc) {
		r->next = x->free;
		x->free = r;
		return rc;
	}
	switch (io->op) {
	case BH_WRITE:
		rc = rados_aio_write_full(x->ioctx, io->name, r->comp, io->buf, io->len);
		break;
	case BH_READ:
		rc = rados_aio_read(x->ioctx, io->name, r->comp, io->buf, io->len, 0);
		break;
	case BH_EXIST:
		rc = rados_aio_stat(x->ioctx, io->name, r->comp, &r->size, &r->mtime);
		break;
	default:
		rc = rados_aio_remove(x->ioctx, io->name, r->comp);
		break;
	}
	if (rc) {
		rados_aio_release(r->comp);
		r->next = x->free;
		x->free = r;
		return rc;
	}
	x->inflight++;
	return 0;
}

static int rb_poll(void *ctx, int timeout_ms)
{
	struct rb_ctx *x = ctx;
	pthread_mutex_lock(&x->mu);
	if (!x->done && timeout_ms != 0 && x->inflight) {
		if (timeout_ms < 0) {
			while (!x->done)
				pthread_cond_wait(&x->cv, &x->mu);
		} else {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += timeout_ms / 1000;
			ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			while (!x->done && pthread_cond_timedwait(&x->cv, &x->mu, &ts) == 0)
				;
		}
	}
	struct rb_io *d = x->done;
	x->done = NULL;
	pthread_mutex_unlock(&x->mu);
	int n = 0;
	while (d) {
		struct rb_io *next = d->next;
		struct bh_io *io = d->io;
		int rc = rados_aio_get_return_value(d->comp);
		rados_aio_release(d->comp);
		d->next = x->free;
		x->free = d;
		x->inflight--;
		size_t got = 0;
		if (io->op == BH_READ && rc >= 0) {
			got = (size_t)rc;
			rc = 0;
		}
		bh_io_done(io, rc > 0 ? 0 : rc, got, got, NULL);
		n++;
		d = next;
	}
	return n;
}

int main(int argc, char **argv)
{
	const char *conf_path = NULL, *keyring = NULL, *id = "admin";
	struct rb_arg a = {.pool = "nkv", .ns = ""};
	struct bh_conf conf;
	bh_conf_init(&conf, true);
	int o;
	while ((o = getopt(argc, argv, "+c:k:i:p:N:o:h")) != -1) {
		switch (o) {
		case 'c': conf_path = optarg; break;
		case 'k': keyring = optarg; break;
		case 'i': id = optarg; break;
		case 'p': a.pool = optarg; break;
		case 'N': a.ns = optarg; break;
		case 'o': conf.json = strcmp(optarg, "json") == 0; break;
		default:
			printf("usage: rados_bench [-c CEPH_CONF] [-k KEYRING] [-i CLIENT_ID] [-p POOL] [-N RADOS_NS] "
			       "[-o json] [KEY=VALUE...]\n\n%s", bh_conf_help);
			return o == 'h' ? 0 : 64;
		}
	}
	for (int i = optind; i < argc; i++)
		if (bh_conf_arg(&conf, argv[i]))
			return 64;
	int rc = rados_create(&a.cluster, id);
	if (!rc)
		rc = rados_conf_read_file(a.cluster, conf_path);
	if (!rc && keyring)
		rc = rados_conf_set(a.cluster, "keyring", keyring);
	if (!rc)
		rc = rados_conf_set(a.cluster, "client_mount_timeout", "15");
	if (!rc) /* as rados-nkv's --op-timeout default: a stuck OSD fails the op instead of hanging */
		rc = rados_conf_set(a.cluster, "rados_osd_op_timeout", "30");
	if (!rc)
		rc = rados_connect(a.cluster);
	if (rc) {
		fprintf(stderr, "rados_bench: cannot connect to the cluster: %s\n", strerror(-rc));
		return 2;
	}
	char target[300];
	snprintf(target, sizeof(target), "librados pool %s ns %s", a.pool, a.ns[0] ? a.ns : "(default)");
	conf.tool = "rados-bench";
	conf.target = target;
	struct bh_backend b = {
		.name = "rados",
		.arg = &a,
		.worker_init = rb_init,
		.worker_fini = rb_fini,
		.submit = rb_submit,
		.poll = rb_poll,
	};
	rc = bh_run(&conf, &b);
	rados_shutdown(a.cluster);
	return rc;
}
