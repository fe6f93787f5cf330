/* SPDX-License-Identifier: Apache-2.0 */
/* auth_dh.c - DH-HMAC-CHAP's Diffie-Hellman jobs on worker threads, and the token buckets that bound
 * what unauthenticated peers may ask for (see auth_dh.h). */
#include "core/auth_dh.h"

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/log.h"

#define SLOTS 512  /* buckets remembered (host NQNs and addresses together) */
#define PROBE 8    /* slots a key may use: a full neighbourhood evicts its fullest bucket */
#define MAX_TEST_DELAY_MS 10000u

enum kind {
	FREE, /* an unused slot */
	NQN,  /* a host NQN's bucket */
	ADDR, /* a source address's bucket */
};

/* A token bucket, in thousandths of a token so that a refill of a few ms counts. */
struct bucket {
	uint8_t kind;      /* enum kind */
	uint8_t key[16];   /* the address, or two 64-bit hashes of the NQN */
	uint32_t milli;    /* tokens x 1000 at @stamp_ms */
	uint64_t stamp_ms;
};

struct nkv_dh_pool {
	pthread_mutex_t lock;         /* the queue, the threads and the buckets */
	pthread_cond_t cv;            /* a job was queued, or stop */
	struct nkv_dh_job *head, *tail;
	unsigned queued;              /* submitted and not yet handed back */
	unsigned nthreads;
	pthread_t threads[NKV_DH_THREADS];
	bool stop;
	unsigned delay_ms;            /* NKV_TEST_DH_DELAY_MS */
	struct bucket b[SLOTS];
};

/* ---- buckets ----------------------------------------------------------------------------------- */

static uint64_t fnv1a(const char *s, uint64_t h)
{
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
	return h;
}

static unsigned burst_of(uint8_t kind)
{
	return kind == NQN ? NKV_DH_NQN_BURST : NKV_DH_ADDR_BURST;
}

static unsigned rate_of(uint8_t kind)
{
	return kind == NQN ? NKV_DH_NQN_RATE : NKV_DH_ADDR_RATE;
}

/* Tokens x 1000 that @b holds at @now. */
static uint32_t level(const struct bucket *b, uint64_t now)
{
	uint64_t cap = (uint64_t)burst_of(b->kind) * 1000, dt = now > b->stamp_ms ? now - b->stamp_ms : 0;
	uint64_t m = b->milli + dt * rate_of(b->kind); /* N tokens/s = N milli-tokens/ms */
	return (uint32_t)(m > cap ? cap : m);
}

/* The bucket of @key, made full when new, never @keep. Evicting the fullest bucket of the
 * neighbourhood loses the least: a full bucket and a new one are the same. */
static struct bucket *find(struct nkv_dh_pool *p, uint8_t kind, const uint8_t *key, uint64_t now,
			   const struct bucket *keep)
{
	uint64_t h = 0xcbf29ce484222325ull ^ kind;
	for (int i = 0; i < 16; i++)
		h = (h ^ key[i]) * 0x100000001b3ull;
	struct bucket *victim = NULL;
	uint32_t vl = 0;
	for (unsigned i = 0; i < PROBE; i++) {
		struct bucket *b = &p->b[(h + i) % SLOTS];
		if (b->kind == kind && memcmp(b->key, key, 16) == 0)
			return b;
		uint32_t l = b->kind ? level(b, now) : UINT32_MAX;
		if (b != keep && (!victim || l > vl)) {
			victim = b;
			vl = l;
		}
	}
	victim->kind = kind;
	memcpy(victim->key, key, 16);
	victim->milli = burst_of(kind) * 1000u;
	victim->stamp_ms = now;
	return victim;
}

int nkv_dh_admit(struct nkv_dh_pool *p, const char *hostnqn, const uint8_t *addr)
{
	uint8_t nk[16];
	uint64_t h1 = fnv1a(hostnqn, 0xcbf29ce484222325ull), h2 = fnv1a(hostnqn, 0x84222325cbf29ce4ull);
	uint64_t now = nkv_now_ms();
	int rc = 0;

	memcpy(nk, &h1, 8);
	memcpy(nk + 8, &h2, 8);
	pthread_mutex_lock(&p->lock);
	struct bucket *bn = find(p, NQN, nk, now, NULL), *ba = addr ? find(p, ADDR, addr, now, bn) : NULL;
	uint32_t ln = level(bn, now), la = ba ? level(ba, now) : 1000;
	if (ln < 1000)
		rc = -EAGAIN;
	else if (la < 1000)
		rc = -EADDRINUSE;
	if (rc == 0) {
		bn->milli = ln - 1000;
		bn->stamp_ms = now;
		if (ba) {
			ba->milli = la - 1000;
			ba->stamp_ms = now;
		}
	}
	pthread_mutex_unlock(&p->lock);
	return rc;
}

/* ---- jobs -------------------------------------------------------------------------------------- */

struct nkv_dh_job *nkv_dh_job_new(void)
{
	return calloc(1, sizeof(struct nkv_dh_job));
}

void nkv_dh_job_free(struct nkv_dh_job *j)
{
	if (!j)
		return;
	nkv_dhchap_dh_free(j->key);
	nkv_dhchap_wipe(j, sizeof(*j));
	free(j);
}

static void run(struct nkv_dh_pool *p, struct nkv_dh_job *j)
{
	if (p->delay_ms) {
		struct timespec ts = {.tv_sec = p->delay_ms / 1000, .tv_nsec = (long)(p->delay_ms % 1000) * 1000000L};
		nanosleep(&ts, NULL);
	}
	if (j->op == NKV_DH_GEN) {
		j->rc = nkv_dhchap_dh_gen(j->group, &j->key, j->val);
	} else {
		int len = nkv_dhchap_dh_len(j->group);
		j->rc = len > 0 ? nkv_dhchap_dh_derive(j->key, j->group, j->val, (size_t)len, j->secret) : -EINVAL;
		nkv_dhchap_dh_free(j->key); /* used once */
		j->key = NULL;
	}
}

_Static_assert(offsetof(struct nkv_dh_job, msg) == 0, "handed_back() finds the job at its message");

/* On the owner thread. */
static void handed_back(struct nkv_msg *m)
{
	struct nkv_dh_job *j = (struct nkv_dh_job *)m; /* msg is its first member */
	j->done(j);
}

static void *worker(void *arg)
{
	struct nkv_dh_pool *p = arg;

	pthread_mutex_lock(&p->lock);
	for (;;) {
		while (!p->head && !p->stop)
			pthread_cond_wait(&p->cv, &p->lock);
		if (!p->head)
			break;
		struct nkv_dh_job *j = p->head;
		if (!(p->head = j->next))
			p->tail = NULL;
		pthread_mutex_unlock(&p->lock);
		run(p, j);
		pthread_mutex_lock(&p->lock);
		p->queued--;
		pthread_mutex_unlock(&p->lock);
		/* Not send_or_run: done() would run here with the owner's state, and this thread must
		 * not be held by the sends it queues. */
		nkv_msgq_send(j->msgq, &j->msg, handed_back);
		pthread_mutex_lock(&p->lock);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

int nkv_dh_submit(struct nkv_dh_pool *p, struct nkv_dh_job *j)
{
	int rc = 0;

	pthread_mutex_lock(&p->lock);
	if (p->queued >= NKV_DH_MAX_QUEUED) {
		rc = -EBUSY;
	} else if (p->nthreads < NKV_DH_THREADS && p->queued >= p->nthreads) {
		/* a job for every running worker: start another (the first job starts the first) */
		if (pthread_create(&p->threads[p->nthreads], NULL, worker, p) == 0)
			p->nthreads++;
		else if (!p->nthreads)
			rc = -EAGAIN;
	}
	if (rc == 0) {
		j->next = NULL;
		if (p->tail)
			p->tail->next = j;
		else
			p->head = j;
		p->tail = j;
		p->queued++;
		pthread_cond_signal(&p->cv);
	}
	pthread_mutex_unlock(&p->lock);
	return rc;
}

struct nkv_dh_pool *nkv_dh_pool_create(void)
{
	struct nkv_dh_pool *p = calloc(1, sizeof(*p));
	const char *d = getenv("NKV_TEST_DH_DELAY_MS");

	if (!p)
		return NULL;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cv, NULL);
	if (d && *d) {
		unsigned long v = strtoul(d, NULL, 10);
		p->delay_ms = v > MAX_TEST_DELAY_MS ? MAX_TEST_DELAY_MS : (unsigned)v;
		NKV_WARN("NKV_TEST_DH_DELAY_MS is set: every DH-HMAC-CHAP key computation waits %u ms first (for tests "
			 "only)", p->delay_ms);
	}
	return p;
}

void nkv_dh_pool_destroy(struct nkv_dh_pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->stop = true;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->lock);
	for (unsigned i = 0; i < p->nthreads; i++)
		pthread_join(p->threads[i], NULL);
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->cv);
	nkv_dhchap_wipe(p->b, sizeof(p->b));
	free(p);
}
