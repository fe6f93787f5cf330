/* SPDX-License-Identifier: Apache-2.0 */
/*
 * s3_bench.c - the Ceph RGW (S3) baseline for bench/compare.sh: the same workload engine and value
 * verification as `nkv bench`, as S3 PutObject / GetObject / HeadObject / DeleteObject over HTTP with
 * AWS Signature V4 (libcurl's CURLOPT_AWS_SIGV4, payload UNSIGNED-PAYLOAD as S3 clients send for
 * streamed bodies). Object name = lowercase hex of the key, in one bucket (created if absent).
 *
 *   s3_bench -e http://127.0.0.1:PORT -b BUCKET -A ACCESS_KEY -S SECRET_KEY [-r REGION] [-o json] KEY=VALUE...
 *
 * Per worker: one curl multi handle with qd easy handles (each keeps its own HTTP/1.1 keep-alive
 * connection, so qd is the number of requests in flight, as with every other system).
 */
#include <curl/curl.h>
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "bench_engine.h"

struct s3_arg {
	const char *endpoint, *bucket, *ak, *sk, *region;
	char sigv4[128], userpwd[256];
};

struct s3_req {
	CURL *e;
	struct bh_io *io;
	size_t off;     /* PUT: bytes sent; GET: bytes received */
	size_t full;    /* GET: bytes the server sent (past the buffer too) */
	struct s3_req *next;
};

struct s3_ctx {
	struct s3_arg *a;
	CURLM *m;
	struct curl_slist *hdr_put, *hdr;
	struct s3_req *reqs, *free;
	unsigned qd;
	int running;
};

static size_t s3_read(char *p, size_t sz, size_t n, void *arg)
{
	struct s3_req *r = arg;
	size_t want = sz * n, left = r->io->len - r->off;
	if (want > left)
		want = left;
	memcpy(p, (const char *)r->io->buf + r->off, want);
	r->off += want;
	return want;
}

static size_t s3_write(char *p, size_t sz, size_t n, void *arg)
{
	struct s3_req *r = arg;
	size_t got = sz * n, room = r->io && r->io->len > r->off ? r->io->len - r->off : 0;
	size_t c = got < room ? got : room;
	if (c)
		memcpy((char *)r->io->buf + r->off, p, c);
	r->off += c;
	r->full += got;
	return got;
}

static size_t s3_discard(char *p, size_t sz, size_t n, void *arg)
{
	(void)p;
	(void)arg;
	return sz * n;
}

static void s3_common(struct s3_ctx *x, struct s3_req *r, const char *path)
{
	char url[1024];
	snprintf(url, sizeof(url), "%s/%s%s%s", x->a->endpoint, x->a->bucket, path ? "/" : "", path ? path : "");
	curl_easy_reset(r->e);
	curl_easy_setopt(r->e, CURLOPT_URL, url);
	curl_easy_setopt(r->e, CURLOPT_AWS_SIGV4, x->a->sigv4);
	curl_easy_setopt(r->e, CURLOPT_USERPWD, x->a->userpwd);
	curl_easy_setopt(r->e, CURLOPT_PRIVATE, r);
	curl_easy_setopt(r->e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(r->e, CURLOPT_TCP_NODELAY, 1L);
	/* no wait for "100 Continue" (removing the Expect header instead breaks curl 7.88's SigV4) */
	curl_easy_setopt(r->e, CURLOPT_EXPECT_100_TIMEOUT_MS, 0L);
	curl_easy_setopt(r->e, CURLOPT_WRITEFUNCTION, s3_discard);
	curl_easy_setopt(r->e, CURLOPT_HTTPHEADER, x->hdr);
}

static void *s3_init(void *arg, unsigned worker, unsigned qd)
{
	struct s3_arg *a = arg;
	struct s3_ctx *x = calloc(1, sizeof(*x));
	x->a = a;
	x->qd = qd;
	x->m = curl_multi_init();
	curl_multi_setopt(x->m, CURLMOPT_MAX_HOST_CONNECTIONS, (long)qd);
	x->hdr = curl_slist_append(NULL, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
	x->reqs = calloc(qd, sizeof(*x->reqs));
	for (unsigned i = 0; i < qd; i++) {
		x->reqs[i].e = curl_easy_init();
		x->reqs[i].next = x->free;
		x->free = &x->reqs[i];
	}
	if (worker == 0) { /* create the bucket (exists already: fine) */
		struct s3_req *r = &x->reqs[0];
		s3_common(x, r, NULL);
		curl_easy_setopt(r->e, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(r->e, CURLOPT_INFILESIZE_LARGE, (curl_off_t)0);
		struct bh_io dummy = {.len = 0};
		r->io = &dummy;
		r->off = 0;
		curl_easy_setopt(r->e, CURLOPT_READFUNCTION, s3_read);
		curl_easy_setopt(r->e, CURLOPT_READDATA, r);
		CURLcode cc = curl_easy_perform(r->e);
		long code = 0;
		curl_easy_getinfo(r->e, CURLINFO_RESPONSE_CODE, &code);
		r->io = NULL;
		if (cc != CURLE_OK || (code != 200 && code != 409)) {
			fprintf(stderr, "s3_bench: create bucket %s at %s: %s, HTTP %ld\n", a->bucket, a->endpoint,
				curl_easy_strerror(cc), code);
			return NULL;
		}
	}
	return x;
}

static void s3_fini(void *ctx)
{
	struct s3_ctx *x = ctx;
	for (unsigned i = 0; i < x->qd; i++) {
		curl_multi_remove_handle(x->m, x->reqs[i].e);
		curl_easy_cleanup(x->reqs[i].e);
	}
	curl_multi_cleanup(x->m);
	curl_slist_free_all(x->hdr);
	free(x->reqs);
	free(x);
}

static int s3_submit(void *ctx, struct bh_io *io)
{
	struct s3_ctx *x = ctx;
	struct s3_req *r = x->free;
	if (!r)
		return -EAGAIN;
	x->free = r->next;
	r->io = io;
	r->off = 0;
	r->full = 0;
	s3_common(x, r, io->name);
	switch (io->op) {
	case BH_WRITE:
		curl_easy_setopt(r->e, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(r->e, CURLOPT_INFILESIZE_LARGE, (curl_off_t)io->len);
		curl_easy_setopt(r->e, CURLOPT_READFUNCTION, s3_read);
		curl_easy_setopt(r->e, CURLOPT_READDATA, r);
		break;
	case BH_READ:
		curl_easy_setopt(r->e, CURLOPT_WRITEFUNCTION, s3_write);
		curl_easy_setopt(r->e, CURLOPT_WRITEDATA, r);
		break;
	case BH_EXIST:
		curl_easy_setopt(r->e, CURLOPT_NOBODY, 1L);
		break;
	default:
		curl_easy_setopt(r->e, CURLOPT_CUSTOMREQUEST, "DELETE");
		break;
	}
	CURLMcode mc = curl_multi_add_handle(x->m, r->e);
	if (mc != CURLM_OK) {
		r->next = x->free;
		x->free = r;
		return -EIO;
	}
	return 0;
}

static int s3_poll(void *ctx, int timeout_ms)
{
	struct s3_ctx *x = ctx;
	int n = 0, left;
	for (;;) {
		curl_multi_perform(x->m, &x->running);
		CURLMsg *msg;
		while ((msg = curl_multi_info_read(x->m, &left))) {
			if (msg->msg != CURLMSG_DONE)
				continue;
			struct s3_req *r = NULL;
			curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&r);
			long code = 0;
			curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &code);
			CURLcode cc = msg->data.result;
			curl_multi_remove_handle(x->m, msg->easy_handle);
			struct bh_io *io = r->io;
			int rc = 0;
			if (cc != CURLE_OK) {
				rc = -EIO;
				fprintf(stderr, "s3_bench: %s: %s\n", io->name, curl_easy_strerror(cc));
			} else if (code == 404)
				rc = -ENOENT;
			else if (code < 200 || code > 299) {
				rc = -EIO;
				fprintf(stderr, "s3_bench: %s: HTTP %ld\n", io->name, code);
			}
			size_t got = r->off, full = r->full;
			r->io = NULL;
			r->next = x->free;
			x->free = r;
			bh_io_done(io, rc, io->op == BH_READ ? got : 0, full, NULL);
			n++;
		}
		if (n || timeout_ms == 0 || !x->running)
			return n;
		curl_multi_poll(x->m, NULL, 0, timeout_ms < 0 ? 1000 : timeout_ms, NULL);
		if (timeout_ms > 0)
			timeout_ms = 0; /* one wait, then report */
	}
}

int main(int argc, char **argv)
{
	struct s3_arg a = {.region = "us-east-1", .bucket = "nkvbench"};
	struct bh_conf conf;
	bh_conf_init(&conf, true);
	int o;
	while ((o = getopt(argc, argv, "+e:b:A:S:r:o:h")) != -1) {
		switch (o) {
		case 'e': a.endpoint = optarg; break;
		case 'b': a.bucket = optarg; break;
		case 'A': a.ak = optarg; break;
		case 'S': a.sk = optarg; break;
		case 'r': a.region = optarg; break;
		case 'o': conf.json = strcmp(optarg, "json") == 0; break;
		default:
			printf("usage: s3_bench -e http://HOST:PORT [-b BUCKET] -A ACCESS_KEY -S SECRET_KEY [-r REGION] "
			       "[-o json] [KEY=VALUE...]\n\n%s", bh_conf_help);
			return o == 'h' ? 0 : 64;
		}
	}
	if (!a.endpoint || !a.ak || !a.sk) {
		fprintf(stderr, "s3_bench: -e, -A and -S are required\n");
		return 64;
	}
	for (int i = optind; i < argc; i++)
		if (bh_conf_arg(&conf, argv[i]))
			return 64;
	snprintf(a.sigv4, sizeof(a.sigv4), "aws:amz:%s:s3", a.region);
	snprintf(a.userpwd, sizeof(a.userpwd), "%s:%s", a.ak, a.sk);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	char target[512];
	snprintf(target, sizeof(target), "s3 %s/%s", a.endpoint, a.bucket);
	conf.tool = "s3-bench";
	conf.target = target;
	struct bh_backend b = {
		.name = "s3",
		.arg = &a,
		.worker_init = s3_init,
		.worker_fini = s3_fini,
		.submit = s3_submit,
		.poll = s3_poll,
	};
	int rc = bh_run(&conf, &b);
	curl_global_cleanup();
	return rc;
}
