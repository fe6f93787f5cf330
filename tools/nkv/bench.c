/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench.c - `nkv bench`: an asynchronous load generator on libnkv over NVMe/TCP, shm or vfio-user. The
 * workload, value verification, histogram and report live in bench_engine.c (shared with the
 * baseline harnesses in bench/); this file is the libnkv backend: one controller, one I/O queue pair
 * per worker thread (TCP: one connection each), buffers from nkv_buf_alloc() (zero copy over shm).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bench_engine.h"
#include "cli.h"

struct nb_arg {
	struct cli *c;
};

struct nb_ctx {
	struct cli *c;
	struct nkv_qpair *qp;
};

static void *nb_init(void *arg, unsigned worker, unsigned qd)
{
	struct nb_arg *a = arg;
	struct nb_ctx *x = calloc(1, sizeof(*x));
	if (!x)
		return NULL;
	x->c = a->c;
	int rc = nkv_qpair_create(a->c->ctrl, (uint16_t)(qd > 65535 ? 65535 : qd), &x->qp);
	if (rc) {
		fprintf(stderr, "nkv: bench: worker %u: cannot create an I/O queue pair: %s\n", worker, strerror(-rc));
		free(x);
		return NULL;
	}
	if (nkv_qpair_depth(x->qp) < qd)
		fprintf(stderr, "nkv: bench: worker %u: queue depth %u granted of %u (commands wait for room)\n", worker,
			nkv_qpair_depth(x->qp), qd);
	return x;
}

static void nb_fini(void *ctx)
{
	struct nb_ctx *x = ctx;
	nkv_qpair_destroy(x->qp);
	free(x);
}

static void *nb_alloc(void *ctx, size_t len)
{
	struct nb_ctx *x = ctx;
	return nkv_buf_alloc(x->c->ctrl, len);
}

static void nb_free(void *ctx, void *buf)
{
	struct nb_ctx *x = ctx;
	nkv_buf_free(x->c->ctrl, buf);
}

static void nb_cb(void *arg, const struct nkv_cpl *cpl)
{
	struct bh_io *io = arg;
	int rc = cpl->status ? nkv_status_errno(cpl->status) : 0;
	bh_io_done(io, rc, cpl->xfer, cpl->dw0, NULL);
}

static int nb_submit(void *ctx, struct bh_io *io)
{
	struct nb_ctx *x = ctx;
	uint32_t ns = x->c->nsid;
	switch (io->op) {
	case BH_WRITE:
		if (x->c->ttl_set || x->c->pin) /* --ttl / --pin: every Store is a Store TTL (F1h) */
			return nkv_store_ttl_async(x->qp, ns, io->key, io->klen, io->buf, (uint32_t)io->len, 0, x->c->ttl_s,
						   x->c->pin, nb_cb, io);
		return nkv_store_async(x->qp, ns, io->key, io->klen, io->buf, (uint32_t)io->len, 0, nb_cb, io);
	case BH_READ:
		return nkv_retrieve_async(x->qp, ns, io->key, io->klen, io->buf, (uint32_t)io->len, nb_cb, io);
	case BH_EXIST:
		return nkv_exist_async(x->qp, ns, io->key, io->klen, nb_cb, io);
	default:
		return nkv_delete_async(x->qp, ns, io->key, io->klen, nb_cb, io);
	}
}

static int nb_poll(void *ctx, int timeout_ms)
{
	struct nb_ctx *x = ctx;
	return nkv_qpair_poll(x->qp, timeout_ms);
}

int cmd_bench(struct cli *c)
{
	struct bh_conf conf;
	bh_conf_init(&conf, true);
	for (int i = 0; i < c->nargs; i++) {
		if (strcmp(c->args[i], "help") == 0) {
			char *text = NULL;
			size_t len = 0;
			FILE *f = open_memstream(&text, &len);
			if (!f)
				return cli_fail(c, "bench help", -ENOMEM, NULL, NULL);
			fprintf(f, "usage: nkv [-t tcp|shm:PATH|vfio-user:PATH] [-a ADDR] [-s PORT] [-n NQN] [--nsid N] [-o json] bench "
				   "[KEY=VALUE...]\n\n%s\n"
				   "Every retrieved value is checked (header with key, version and length; pattern from key\n"
				   "and version); any mismatch or error makes the exit status 1. Latency runs from when an\n"
				   "I/O's queue slot became free, so a wait before its submit counts too.\n"
				   "nkv --ttl SECONDS|none [--pin] bench ...: every Store is a Store TTL (cache namespaces);\n"
				   "a TTL shorter than the run makes reads of expired keys fail.\n",
				bh_conf_help);
			fclose(f);
			cli_help(c, text);
			free(text);
			return EXIT_OK;
		}
		if (bh_conf_arg(&conf, c->args[i]))
			return cli_usage(c, "bench: bad argument '%s' (nkv bench help lists them)", c->args[i]);
	}
	conf.json = c->json;
	conf.tool = "nkv-bench";
	conf.command = "bench"; /* the JSON report is this run's one object: it names the command */
	if (!c->opts.queue_depth)
		c->opts.queue_depth = (uint16_t)(conf.qd > 65535 ? 65535 : conf.qd);
	int ex = cli_connect(c, false);
	if (ex)
		return ex;
	char target[512];
	if (c->shm_path)
		snprintf(target, sizeof(target), "%s nsid %u", c->shm_addr, c->nsid);
	else
		snprintf(target, sizeof(target), "tcp:%s:%s %s nsid %u", c->traddr, c->trsvcid ? c->trsvcid : "4420",
			 c->nqn, c->nsid);
	conf.target = target;
	struct nb_arg arg = {.c = c};
	struct bh_backend b = {
		.name = "nkv",
		.arg = &arg,
		.worker_init = nb_init,
		.worker_fini = nb_fini,
		.buf_alloc = nb_alloc,
		.buf_free = nb_free,
		.submit = nb_submit,
		.poll = nb_poll,
	};
	int rc = bh_run(&conf, &b);
	if (rc == 2) /* refused before running (reason on stderr): nothing printed */
		cli_json_error(c, "bench: could not start (the reason is on stderr)", -EINVAL, 0);
	return rc == 0 ? EXIT_OK : EXIT_ERR;
}
