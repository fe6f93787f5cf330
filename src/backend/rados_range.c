/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rados_range.c - a large Retrieve read in ranges, so that the transport sends the value's first
 * bytes while the OSD still reads the rest (cut-through; docs/design.md section 2.3).
 *
 * Read whole, a 32 MiB value crosses twice in a row: OSD to gateway, then gateway to host. Read as
 * ranged ops (stat + read each) in a sliding window, the ranges land one after the other and each
 * is reported (nkv_kvio_progress) as soon as every range before it has landed: NVMe/TCP sends it as
 * a C2HData PDU while the next ones are read. The window keeps RANGE_WINDOW ops queued at the OSD,
 * so its disk and messenger never wait for the gateway.
 *
 * One value, not pieces of several: every range carries the object's version (the reply's user
 * version) and size, and a range whose version differs from the first one's is never reported. If
 * nothing was reported yet, the value is read again whole (one op, atomic against a Store); if
 * the transport already sent a prefix, the Retrieve fails with -EAGAIN (82h, DNR clear: the host
 * retries). A Store is one write_full, so what the host got before such a failure is a prefix of
 * one version, and the status says it is not a value.
 *
 * Deadlines: the Retrieve is one entry of the in-flight list (one deadline for all its ranges);
 * the watchdog cancels every range it finds in flight (rados_range_cancel), and a range submitted
 * meanwhile cancels itself. Each range holds a reference on the I/O; completions and ops live
 * until the last reference goes (rados_range_finish), so a cancel never meets a released one.
 *
 * Only plain-namespace Retrieves of large buffers are split (cache namespaces read their record
 * with the value), and only while few are: each range is an op the OSD pays for, and at high
 * queue depth the other commands already keep the pipe full.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "rados_int.h"

#define RANGE_CHUNK (1u << 20) /* bytes per range, more when the buffer needs over RANGES_MAX */
#define RANGE_WINDOW 4         /* ranges in flight per Retrieve */
#define RANGES_MAX 64          /* ranges per Retrieve at most */
#define RANGE_READS_MAX 2      /* Retrieves read in ranges at once per device; others are read whole */

struct range {
	struct split *s;
	rados_read_op_t op;
	rados_completion_t comp;
	uint64_t size;
	time_t mtime;
	size_t got;
	int rv_stat, rv_read;
	uint64_t ver;
	bool landed;
};

struct split {
	pthread_mutex_t lock;
	struct nkv_kvio *io;
	char oid[NKV_OID_MAX];
	uint32_t chunk;
	unsigned n;        /* ranges covering the host buffer */
	unsigned issued;   /* ranges made (op and completion), in order: r[0 .. issued) */
	unsigned inflight; /* issued and not landed */
	unsigned prefix;   /* leading ranges landed and checked */
	bool known;        /* size, ver and end are the first landed range's */
	uint64_t size, ver;
	uint32_t end;      /* bytes the Retrieve returns: min(len, size - offset) */
	int rc;            /* the first failure */
	bool cancelled;
	struct range r[];
};

static uint32_t range_len(const struct split *s, unsigned i)
{
	uint32_t off = i * s->chunk, len = s->io->len;
	return len - off < s->chunk ? len - off : s->chunk;
}

/* Bytes range @i must have read, given the size: the part of it before s->end. */
static uint32_t range_want(const struct split *s, unsigned i)
{
	uint32_t off = i * s->chunk;
	if (off >= s->end)
		return 0;
	return s->end - off < range_len(s, i) ? s->end - off : range_len(s, i);
}

/* More ranges to issue (s->lock held)? Before the size is known, the first window; after, only
 * ranges that start before the end. */
static bool want_more(const struct split *s)
{
	if (s->rc || s->cancelled || s->issued >= s->n || s->inflight >= RANGE_WINDOW)
		return false;
	return !s->known || (uint64_t)s->issued * s->chunk < s->end;
}

static void range_done(rados_completion_t c, void *arg);

/* Make range r[issued]'s op and completion (s->lock held). @return its index, or -ENOMEM. */
static int range_make(struct split *s)
{
	struct range *r = &s->r[s->issued];
	uint64_t off = s->io->offset + (uint64_t)s->issued * s->chunk;

	memset(r, 0, sizeof(*r));
	r->s = s;
	if (!(r->op = rados_create_read_op()))
		return -ENOMEM;
	if (rados_aio_create_completion2(r, range_done, &r->comp) < 0) {
		rados_release_read_op(r->op);
		r->op = NULL;
		return -ENOMEM;
	}
	rados_read_op_stat(r->op, &r->size, &r->mtime, &r->rv_stat);
	rados_read_op_read(r->op, off, range_len(s, s->issued), (char *)s->io->buf + s->issued * s->chunk, &r->got,
			   &r->rv_read);
	s->inflight++;
	atomic_fetch_add_explicit(&s->io->be_refs, 1, memory_order_relaxed);
	return (int)s->issued++;
}

/* Claim what the window allows (s->lock held) into @idx. @return how many. */
static unsigned claim(struct split *s, int idx[RANGE_WINDOW])
{
	unsigned k = 0;
	int i;

	while (want_more(s)) {
		if ((i = range_make(s)) < 0) {
			s->rc = i;
			break;
		}
		idx[k++] = i;
	}
	return k;
}

/* Submit claimed ranges (no lock held). A range submitted after the watchdog's cancel cancels
 * itself; one librados refuses lands as failed here. */
static void submit(struct split *s, const int *idx, unsigned k)
{
	struct nkv_kvns *h = s->io->be_ns;

	for (unsigned j = 0; j < k; j++) {
		struct range *r = &s->r[idx[j]];
		int rc = rados_aio_read_op_operate(r->op, h->ioctx, r->comp, s->oid, 0);
		if (rc < 0) {
			pthread_mutex_lock(&s->lock);
			r->landed = true;
			s->inflight--;
			if (!s->rc)
				s->rc = rc;
			pthread_mutex_unlock(&s->lock);
			rados_io_put(s->io);
			continue;
		}
		pthread_mutex_lock(&s->lock);
		bool cancel = s->cancelled;
		pthread_mutex_unlock(&s->lock);
		if (cancel)
			rados_aio_cancel(h->ioctx, r->comp);
	}
}

/* A range landed (librados thread): check it against the first, extend the reported prefix, refill
 * the window, drop its reference. */
static void range_done(rados_completion_t c, void *arg)
{
	struct range *r = arg;
	struct split *s = r->s;
	struct nkv_kvio *io = s->io;
	int rc = rados_aio_get_return_value(c), idx[RANGE_WINDOW];
	uint64_t ver = rados_aio_get_version(c);
	uint32_t report = 0;

	pthread_mutex_lock(&s->lock);
	r->landed = true;
	r->ver = ver;
	s->inflight--;
	io->copied_out += r->got; /* the C API copied the part's reply into buf (0 bytes if none) */
	if (rc < 0) {
		if (!s->rc)
			s->rc = rc;
	} else if (!s->known) {
		s->known = true;
		s->size = r->size;
		s->ver = ver;
		s->end = r->size > io->offset ? (uint32_t)(r->size - io->offset < io->len ? r->size - io->offset : io->len) : 0;
		if (io->exact && r->size > io->offset && r->size - io->offset > io->len)
			s->rc = -EFBIG; /* more than one command moves: 85h, and no prefix reported */
	} else if (r->size != s->size || ver != s->ver) {
		/* stored (or deleted and stored) again between two ranges: not one value */
		if (!s->rc)
			s->rc = -EAGAIN;
	}
	if (!s->rc) {
		while (s->prefix < s->issued && s->r[s->prefix].landed) {
			struct range *p = &s->r[s->prefix];
			if (p->ver != s->ver || p->size != s->size || p->got != range_want(s, s->prefix)) {
				s->rc = -EAGAIN;
				break;
			}
			s->prefix++;
		}
		uint64_t bytes = (uint64_t)s->prefix * s->chunk;
		if (!s->rc && bytes < s->end)
			report = (uint32_t)bytes; /* never the end: the last bytes go with the completion */
	}
	unsigned k = claim(s, idx);
	pthread_mutex_unlock(&s->lock);
	if (report)
		nkv_kvio_progress(io, report);
	submit(s, idx, k);
	rados_io_put(io);
}

bool rados_range_submit(struct nkv_kvns *h, struct nkv_kvio *io, const char *oid)
{
	struct nkv_kvdev *d = h->dev;
	int idx[RANGE_WINDOW];

	if (!d->range_min || io->cache || io->op != NKV_IO_RETRIEVE || io->len < d->range_min ||
	    io->offset >= RANGE_OFFSET_MAX)
		return false;
	if (atomic_fetch_add(&d->range_reads, 1) >= RANGE_READS_MAX) {
		atomic_fetch_sub(&d->range_reads, 1);
		return false;
	}
	uint32_t chunk = RANGE_CHUNK;
	while ((io->len + (uint64_t)chunk - 1) / chunk > RANGES_MAX)
		chunk *= 2;
	unsigned n = (unsigned)((io->len + (uint64_t)chunk - 1) / chunk);
	struct split *s = calloc(1, sizeof(*s) + n * sizeof(struct range));
	if (!s) {
		atomic_fetch_sub(&d->range_reads, 1);
		return false;
	}
	pthread_mutex_init(&s->lock, NULL);
	s->io = io;
	s->chunk = chunk;
	s->n = n;
	snprintf(s->oid, sizeof(s->oid), "%s", oid);
	io->be_split = s;
	io->be_ns = h;
	io->be_tries = 0;
	rados_flight_add(d, io, true); /* one reference: this submitter's, dropped below */
	pthread_mutex_lock(&s->lock);
	unsigned k = claim(s, idx);
	pthread_mutex_unlock(&s->lock);
	submit(s, idx, k);
	rados_io_put(io);
	return true;
}

void rados_range_cancel(struct nkv_kvio *io)
{
	struct split *s = io->be_split;
	struct nkv_kvns *h = io->be_ns;
	rados_completion_t cs[RANGES_MAX];
	unsigned k = 0;

	pthread_mutex_lock(&s->lock);
	s->cancelled = true;
	for (unsigned i = 0; i < s->issued; i++)
		if (!s->r[i].landed)
			cs[k++] = s->r[i].comp;
	pthread_mutex_unlock(&s->lock);
	for (unsigned i = 0; i < k; i++)
		rados_aio_cancel(h->ioctx, cs[i]); /* the caller's reference keeps them alive */
}

void rados_range_finish(struct nkv_kvio *io)
{
	struct split *s = io->be_split;
	struct nkv_kvns *h = io->be_ns;
	int rc = s->rc;

	rados_flight_del(h->dev, io);
	for (unsigned i = 0; i < s->issued; i++) {
		rados_aio_release(s->r[i].comp);
		rados_release_read_op(s->r[i].op);
	}
	if (rc == 0 && (uint64_t)s->prefix * s->chunk < s->end)
		rc = -EIO; /* cannot happen: the window issues until the end and every range was checked */
	if (rc == 0) {
		io->value_size = s->size;
		io->xfer = s->end;
	}
	if (io->be_cancelled && rc == -ECANCELED)
		rc = -ETIMEDOUT; /* our deadline: 82h Namespace Not Ready, DNR clear */
	char oid[NKV_OID_MAX];
	memcpy(oid, s->oid, sizeof(oid));
	io->be_split = NULL;
	pthread_mutex_destroy(&s->lock);
	free(s);
	atomic_fetch_sub(&h->dev->range_reads, 1);
	/* Stored again while read, and nothing reported yet (always so where the transport takes no
	 * reports): read it again whole, in one op, which no Store can split, within the deadline. */
	if (rc == -EAGAIN)
		NKV_DEBUG("rados: %s: object %s stored again while read in parts: %s", h->name, oid,
			  atomic_load(&io->ready) ? "82h (a prefix was sent)" : "read again whole");
	if (rc == -EAGAIN && atomic_load(&io->ready) == 0) {
		io->be_tries = 1; /* keeps the deadline */
		if ((rc = rados_submit_op(h, io, oid)) == 0)
			return;
	}
	nkv_kvio_complete(io, rc); /* queued behind the last progress report, never run here */
}
