/* SPDX-License-Identifier: Apache-2.0 */
/* test_auth_dh.c - DH-HMAC-CHAP's DH workers and token buckets (src/core/auth_dh.c): a job computes
 * off the calling thread and comes back through the owner's message queue with a key pair that
 * derives the same secret as the peer's; the pool refuses jobs past its global bound; a host NQN and
 * an address each get their burst, then are refused without charging the other bucket, refill with
 * time, and one host NQN or address running dry does not touch another's. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <time.h>

#include "core/auth_dh.h"

static void sleep_ms(int ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static int g_done;

static void on_done(struct nkv_dh_job *j)
{
	g_done++;
	(void)j; /* freed by the test, which reads the result */
}

static struct nkv_dh_job *job(struct nkv_msgq *q, enum nkv_dh_op op, uint8_t group)
{
	struct nkv_dh_job *j = nkv_dh_job_new();
	assert_non_null(j);
	j->op = op;
	j->group = group;
	j->msgq = q;
	j->done = on_done;
	return j;
}

/* Wait (on the owner's queue) until @n jobs came back in all. */
static void wait_done(struct nkv_msgq *q, int n)
{
	for (int i = 0; i < 600 && g_done < n; i++)
		nkv_msgq_poll(q, 100);
	assert_int_equal(g_done, n);
}

static void t_jobs(void **state)
{
	(void)state;
	struct nkv_msgq q;
	struct nkv_dh_pool *p = nkv_dh_pool_create();
	assert_non_null(p);
	assert_int_equal(nkv_msgq_init(&q), 0);
	g_done = 0;
	/* ours and a peer's key pair, then each side's secret: they agree */
	struct nkv_dh_job *a = job(&q, NKV_DH_GEN, NKV_DHCHAP_FFDHE2048), *b = job(&q, NKV_DH_GEN, NKV_DHCHAP_FFDHE2048);
	assert_int_equal(nkv_dh_submit(p, a), 0);
	assert_int_equal(nkv_dh_submit(p, b), 0);
	wait_done(&q, 2);
	assert_int_equal(a->rc, 0);
	assert_int_equal(b->rc, 0);
	assert_non_null(a->key);
	struct nkv_dh_job *da = job(&q, NKV_DH_DERIVE, NKV_DHCHAP_FFDHE2048), *db = job(&q, NKV_DH_DERIVE, NKV_DHCHAP_FFDHE2048);
	da->key = a->key;
	a->key = NULL;
	memcpy(da->val, b->val, 256);
	db->key = b->key;
	b->key = NULL;
	memcpy(db->val, a->val, 256);
	assert_int_equal(nkv_dh_submit(p, da), 0);
	assert_int_equal(nkv_dh_submit(p, db), 0);
	wait_done(&q, 4);
	assert_int_equal(da->rc, 0);
	assert_int_equal(db->rc, 0);
	assert_null(da->key); /* consumed by the worker */
	assert_memory_equal(da->secret, db->secret, 256);
	/* a peer value outside 2 .. p - 2 */
	struct nkv_dh_job *g = job(&q, NKV_DH_GEN, NKV_DHCHAP_FFDHE2048);
	assert_int_equal(nkv_dh_submit(p, g), 0);
	wait_done(&q, 5);
	struct nkv_dh_job *bad = job(&q, NKV_DH_DERIVE, NKV_DHCHAP_FFDHE2048);
	bad->key = g->key;
	g->key = NULL;
	bad->val[255] = 1;
	assert_int_equal(nkv_dh_submit(p, bad), 0);
	wait_done(&q, 6);
	assert_int_equal(bad->rc, -EINVAL);
	struct nkv_dh_job *all[] = {a, b, da, db, g, bad};
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		nkv_dh_job_free(all[i]);
	nkv_dh_pool_destroy(p);
	nkv_msgq_fini(&q);
}

/* NKV_DH_MAX_QUEUED jobs held by slow workers: the next one is refused. */
static void t_bound(void **state)
{
	(void)state;
	struct nkv_msgq q;
	struct nkv_dh_job *jobs[NKV_DH_MAX_QUEUED];
	setenv("NKV_TEST_DH_DELAY_MS", "200", 1);
	struct nkv_dh_pool *p = nkv_dh_pool_create();
	unsetenv("NKV_TEST_DH_DELAY_MS");
	assert_non_null(p);
	assert_int_equal(nkv_msgq_init(&q), 0);
	g_done = 0;
	for (int i = 0; i < NKV_DH_MAX_QUEUED; i++) {
		jobs[i] = job(&q, NKV_DH_GEN, NKV_DHCHAP_FFDHE2048);
		assert_int_equal(nkv_dh_submit(p, jobs[i]), 0);
	}
	struct nkv_dh_job *more = job(&q, NKV_DH_GEN, NKV_DHCHAP_FFDHE2048);
	/* the first jobs sleep 200 ms before they compute: none came back yet */
	assert_int_equal(nkv_dh_submit(p, more), -EBUSY);
	nkv_dh_job_free(more);
	wait_done(&q, NKV_DH_MAX_QUEUED);
	for (int i = 0; i < NKV_DH_MAX_QUEUED; i++) {
		assert_int_equal(jobs[i]->rc, 0);
		nkv_dh_job_free(jobs[i]);
	}
	nkv_dh_pool_destroy(p);
	nkv_msgq_fini(&q);
}

static void addr4(uint8_t *a, uint8_t last)
{
	memset(a, 0, 16);
	a[10] = a[11] = 0xff;
	a[12] = 192;
	a[13] = 0;
	a[14] = 2;
	a[15] = last;
}

static void t_buckets(void **state)
{
	(void)state;
	struct nkv_dh_pool *p = nkv_dh_pool_create();
	uint8_t a1[16], a2[16];
	char nqn[64];
	addr4(a1, 1);
	addr4(a2, 2);
	assert_non_null(p);
	/* one host NQN: its burst, then -EAGAIN; the address is not charged for the refusals */
	for (int i = 0; i < NKV_DH_NQN_BURST; i++)
		assert_int_equal(nkv_dh_admit(p, "nqn.2014-08.org.nvmexpress:uuid:x", a1), 0);
	for (int i = 0; i < 100; i++)
		assert_int_equal(nkv_dh_admit(p, "nqn.2014-08.org.nvmexpress:uuid:x", a1), -EAGAIN);
	assert_int_equal(nkv_dh_admit(p, "nqn.2014-08.org.nvmexpress:uuid:x", NULL), -EAGAIN);
	/* other host NQNs from the same address: the address's burst in all (16 went already) */
	int ok = 0, n = 0;
	for (n = 0; n < 1000; n++) {
		snprintf(nqn, sizeof(nqn), "nqn.2014-08.org.nvmexpress:uuid:y%d", n / 4);
		int rc = nkv_dh_admit(p, nqn, a1);
		if (rc == -EADDRINUSE)
			break;
		assert_int_equal(rc, 0);
		ok++;
	}
	assert_int_equal(ok, NKV_DH_ADDR_BURST - NKV_DH_NQN_BURST);
	/* another address and a new host NQN: untouched */
	assert_int_equal(nkv_dh_admit(p, "nqn.2014-08.org.nvmexpress:uuid:z", a2), 0);
	/* refill: 4 a second for the host NQN (at least one token after 300 ms) */
	sleep_ms(300);
	assert_int_equal(nkv_dh_admit(p, "nqn.2014-08.org.nvmexpress:uuid:x", a2), 0);
	nkv_dh_pool_destroy(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_jobs),
		cmocka_unit_test(t_bound),
		cmocka_unit_test(t_buckets),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
