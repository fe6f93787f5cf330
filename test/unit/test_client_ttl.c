/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_client_ttl.c - libnkv's Store TTL without a target: nkv_store_ttl(), nkv_store_ttl_async() and
 * the engine's STORE ops (ttl_s, NKV_OP_PIN, NKV_OP_HASH) over a fake transport that records every SQE and
 * answers with a status the test chooses. Checks the opcode (F1h only when a TTL or a pin is asked
 * for, else Store 01h), CDW12/CDW13, the data buffer handed to the transport, the errno each status
 * maps to (02h -EINVAL, 81h -ENOSPC, 01h -EOPNOTSUPP), and what the engine refuses before sending.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "client/internal.h"
#include "nkv/nkv.h"

/* ---- the fake transport ------------------------------------------------------------------------ */

#define FAKE_MAX 64

struct fake_cmd {
	struct nkv_sqe sqe;
	void *buf;
	uint32_t len;
	nkv_cb cb;
	void *arg;
};

/* Submitted commands complete in poll(), never inside submit(): the engine files an op as in flight
 * after nkv_submit() returns, as a real transport's completion arrives later. */
static struct {
	pthread_mutex_t mu;
	struct fake_cmd sent[FAKE_MAX]; /* every command ever submitted, in order */
	unsigned nsent, ndone;
	uint16_t status;                /* the status every completion carries (SCT << 8 | SC) */
} F = {.mu = PTHREAD_MUTEX_INITIALIZER};

static int fake_submit(struct nkv_qpair *qp, const struct nkv_sqe *sqe, void *buf, uint32_t len, nkv_cb cb, void *arg,
		       unsigned flags)
{
	(void)flags;
	pthread_mutex_lock(&F.mu);
	if (F.nsent == FAKE_MAX) {
		pthread_mutex_unlock(&F.mu);
		return -EAGAIN;
	}
	F.sent[F.nsent++] = (struct fake_cmd){.sqe = *sqe, .buf = buf, .len = len, .cb = cb, .arg = arg};
	qp->outstanding++;
	pthread_mutex_unlock(&F.mu);
	return 0;
}

static int fake_poll(struct nkv_qpair *qp, int timeout_ms)
{
	(void)timeout_ms;
	int n = 0;
	for (;;) {
		pthread_mutex_lock(&F.mu);
		if (F.ndone == F.nsent) {
			pthread_mutex_unlock(&F.mu);
			return n;
		}
		struct fake_cmd c = F.sent[F.ndone++];
		qp->outstanding--;
		struct nkv_cpl cpl = {.status = F.status};
		pthread_mutex_unlock(&F.mu);
		c.cb(c.arg, &cpl); /* outside the lock: the engine's callback takes its own */
		n++;
	}
}

static int fake_flush(struct nkv_qpair *qp)
{
	(void)qp;
	return 0;
}

static void fake_fail(struct nkv_qpair *qp, int err)
{
	qp->err = err;
}

static int fake_qp_create(struct nkv_ctrl *ctrl, uint16_t qid, uint16_t depth, struct nkv_qpair **out);

static void fake_qp_destroy(struct nkv_qpair *qp)
{
	free(qp);
}

static const struct nkv_transport_ops fake_ops = {
	.name = "fake",
	.qp_create = fake_qp_create,
	.qp_destroy = fake_qp_destroy,
	.submit = fake_submit,
	.flush = fake_flush,
	.poll = fake_poll,
	.fail = fake_fail,
};

static int fake_qp_create(struct nkv_ctrl *ctrl, uint16_t qid, uint16_t depth, struct nkv_qpair **out)
{
	struct nkv_qpair *qp = calloc(1, sizeof(*qp));
	if (!qp)
		return -ENOMEM;
	qp->ctrl = ctrl;
	qp->ops = &fake_ops;
	qp->qid = qid;
	qp->depth = depth;
	qp->fd = -1;       /* the engine's idle poll() ignores it */
	qp->txq_head = -1; /* nothing queued to send */
	qp->timeout_ms = 5000;
	*out = qp;
	return 0;
}

static struct nkv_ctrl *fake_ctrl(void)
{
	struct nkv_ctrl *c = calloc(1, sizeof(*c));
	assert_non_null(c);
	c->ops = &fake_ops;
	pthread_mutex_init(&c->qp_mu, NULL);
	c->nio = 1;
	c->cap = 63; /* MQES 0's based: 64 entries */
	c->opts.queue_depth = 32;
	c->opts.timeout_ms = 5000;
	return c;
}

static void fake_ctrl_free(struct nkv_ctrl *c)
{
	pthread_mutex_destroy(&c->qp_mu);
	free(c);
}

static void fake_reset(uint16_t status)
{
	pthread_mutex_lock(&F.mu);
	F.nsent = F.ndone = 0;
	F.status = status;
	pthread_mutex_unlock(&F.mu);
}

static const struct nkv_sqe *sent(unsigned i)
{
	assert_true(i < F.nsent);
	return &F.sent[i].sqe;
}

/* ---- nkv_store_ttl / _async -------------------------------------------------------------------- */

static void store_ttl_sync(void **state)
{
	(void)state;
	struct nkv_ctrl *ctrl = fake_ctrl();
	struct nkv_qpair *qp = NULL;
	assert_int_equal(nkv_qpair_create(ctrl, 0, &qp), 0);
	static const char val[] = "a cached block";
	struct nkv_cpl cpl;

	fake_reset(0);
	assert_int_equal(nkv_store_ttl(qp, 3, "blk", 3, val, sizeof(val), NKV_STORE_MUST_NOT_EXIST, 2, false, &cpl), 0);
	assert_int_equal(F.nsent, 1);
	const struct nkv_sqe *s = sent(0);
	assert_int_equal(s->opc, NKV_VS_STORE_TTL);
	assert_int_equal(nkv_get32(&s->nsid), 3);
	assert_int_equal(nkv_sqe_klen(s), 3);
	assert_int_equal(nkv_sqe_kv_opts(s), NKV_STORE_MUST_NOT_EXIST);
	assert_int_equal(nkv_get32(&s->cdw10), sizeof(val));
	assert_int_equal(nkv_get32(&s->cdw12), 2);
	assert_int_equal(nkv_get32(&s->cdw13), 0);
	assert_ptr_equal(F.sent[0].buf, val); /* the caller's buffer, as Store: no copy here */
	assert_int_equal(F.sent[0].len, sizeof(val));

	/* pinned, never expiring, default TTL */
	assert_int_equal(nkv_store_ttl(qp, 3, "blk", 3, val, 4, 0, 60, true, NULL), 0);
	assert_int_equal(nkv_get32(&sent(1)->cdw12), 60);
	assert_int_equal(nkv_get32(&sent(1)->cdw13), NKV_TTL_PIN);
	assert_int_equal(nkv_store_ttl(qp, 3, "blk", 3, val, 4, 0, NKV_TTL_NONE, false, NULL), 0);
	assert_int_equal(nkv_get32(&sent(2)->cdw12), 0xffffffffu);
	assert_int_equal(nkv_store_ttl(qp, 3, "blk", 3, NULL, 0, 0, NKV_TTL_DEFAULT, true, NULL), 0); /* empty value */
	assert_int_equal(sent(3)->opc, 0xf1);
	assert_int_equal(nkv_get32(&sent(3)->cdw10) | nkv_get32(&sent(3)->cdw12), 0);
	assert_int_equal(nkv_get32(&sent(3)->cdw13), 1);

	/* the target's answers, as errnos */
	fake_reset(0x002); /* Invalid Field: no cache on the namespace, or a pin without a finite TTL */
	assert_int_equal(nkv_store_ttl(qp, 1, "k", 1, val, 4, 0, 0, true, &cpl), -EINVAL);
	assert_int_equal(cpl.status, 0x002);
	fake_reset(0x081); /* pin quota */
	assert_int_equal(nkv_store_ttl(qp, 1, "k", 1, val, 4, 0, 10, true, NULL), -ENOSPC);
	fake_reset(0x001); /* a target without F1h */
	assert_int_equal(nkv_store_ttl(qp, 1, "k", 1, val, 4, 0, 10, false, NULL), -EOPNOTSUPP);
	fake_reset(0x089); /* --must-not-exist */
	assert_int_equal(nkv_store_ttl(qp, 1, "k", 1, val, 4, NKV_STORE_MUST_NOT_EXIST, 10, false, NULL), -EEXIST);

	/* bad arguments never reach the transport */
	fake_reset(0);
	assert_int_equal(nkv_store_ttl(qp, 1, "k", 0, val, 4, 0, 10, false, NULL), -EINVAL);
	assert_int_equal(nkv_store_ttl(qp, 1, "0123456789abcdefX", 17, val, 4, 0, 10, false, NULL), -EINVAL);
	assert_int_equal(nkv_store_ttl(qp, 1, NULL, 3, val, 4, 0, 10, false, NULL), -EINVAL);
	assert_int_equal(nkv_store_ttl(qp, 1, "k", 1, NULL, 4, 0, 10, false, NULL), -EINVAL);
	assert_int_equal(nkv_store_ttl(NULL, 1, "k", 1, val, 4, 0, 10, false, NULL), -EINVAL);
	assert_int_equal(F.nsent, 0);

	nkv_qpair_destroy(qp);
	fake_ctrl_free(ctrl);
}

static void count_cb(void *arg, const struct nkv_cpl *cpl)
{
	int *rc = arg;
	*rc = nkv_cpl_errno(cpl);
}

static void store_ttl_async(void **state)
{
	(void)state;
	struct nkv_ctrl *ctrl = fake_ctrl();
	struct nkv_qpair *qp = NULL;
	assert_int_equal(nkv_qpair_create(ctrl, 0, &qp), 0);
	uint8_t val[100];
	memset(val, 7, sizeof(val));
	int rc1 = 1, rc2 = 1;

	fake_reset(0x081);
	assert_int_equal(nkv_store_ttl_async(qp, 2, "x", 1, val, sizeof(val), 0, 7, true, count_cb, &rc1), 0);
	assert_int_equal(nkv_store_ttl_async(qp, 2, "y", 1, val, 10, 0, 0, false, count_cb, &rc2), 0);
	assert_int_equal(rc1, 1); /* not before a poll */
	assert_int_equal(nkv_qpair_poll(qp, 0), 2);
	assert_int_equal(rc1, -ENOSPC);
	assert_int_equal(rc2, -ENOSPC);
	assert_int_equal(sent(0)->opc, 0xf1);
	assert_int_equal(nkv_get32(&sent(0)->cdw12), 7);
	assert_int_equal(nkv_get32(&sent(0)->cdw13), 1);
	assert_ptr_equal(F.sent[0].buf, val);
	assert_int_equal(F.sent[0].len, sizeof(val));
	assert_int_equal(sent(1)->opc, 0xf1); /* ttl 0 asked explicitly: still F1h (the namespace's default) */
	assert_int_equal(nkv_get32(&sent(1)->cdw12) | nkv_get32(&sent(1)->cdw13), 0);
	assert_int_equal(nkv_store_ttl_async(qp, 2, "x", 0, val, 1, 0, 7, true, count_cb, &rc1), -EINVAL);
	assert_int_equal(nkv_store_ttl_async(qp, 2, "x", 1, NULL, 1, 0, 7, true, count_cb, &rc1), -EINVAL);
	assert_int_equal(F.nsent, 2);

	nkv_qpair_destroy(qp);
	fake_ctrl_free(ctrl);
}

/* ---- the engine -------------------------------------------------------------------------------- */

static void set_op(struct nkv_op *op, uint8_t type, const char *key, void *buf, uint32_t len)
{
	memset(op, 0, sizeof(*op));
	op->type = type;
	op->klen = (uint8_t)strlen(key);
	memcpy(op->key, key, op->klen);
	op->nsid = 5;
	op->buf = buf;
	op->len = len;
}

/* The SQE the fake transport got for the op whose key is @key. */
static const struct nkv_sqe *sent_for(const char *key)
{
	for (unsigned i = 0; i < F.nsent; i++) {
		uint8_t k[16];
		nkv_sqe_get_key(&F.sent[i].sqe, k);
		if (nkv_sqe_klen(&F.sent[i].sqe) == strlen(key) && memcmp(k, key, strlen(key)) == 0)
			return &F.sent[i].sqe;
	}
	fail_msg("no command for key %s", key);
	return NULL;
}

static void engine_store_ttl(void **state)
{
	(void)state;
	struct nkv_ctrl *ctrl = fake_ctrl();
	struct nkv_engine *e = NULL;
	struct nkv_engine_opts eo = {.queues = 1, .timeout_ms = 5000};
	assert_int_equal(nkv_engine_create(ctrl, &eo, &e), 0);
	uint8_t v[64] = {1, 2, 3};
	struct nkv_op ops[5];

	fake_reset(0);
	set_op(&ops[0], NKV_OP_STORE, "plain", v, 64); /* no ttl, no pin: Store 01h */
	set_op(&ops[1], NKV_OP_STORE, "ttl", v, 64);
	ops[1].ttl_s = 30;
	set_op(&ops[2], NKV_OP_STORE, "pin", v, 32);
	ops[2].flags = NKV_OP_PIN; /* pin, the namespace's default TTL */
	ops[2].opts = NKV_STORE_MUST_EXIST;
	set_op(&ops[3], NKV_OP_STORE, "both", v, 8);
	ops[3].flags = NKV_OP_PIN;
	ops[3].ttl_s = NKV_TTL_NONE;
	set_op(&ops[4], NKV_OP_RETRIEVE, "get", v, 64);
	assert_int_equal(nkv_engine_run(e, ops, 5), 0);
	assert_int_equal(F.nsent, 5);

	const struct nkv_sqe *s = sent_for("plain");
	assert_int_equal(s->opc, NKV_KV_STORE);
	assert_int_equal(nkv_get32(&s->cdw12) | nkv_get32(&s->cdw13), 0);
	s = sent_for("ttl");
	assert_int_equal(s->opc, NKV_VS_STORE_TTL);
	assert_int_equal(nkv_get32(&s->nsid), 5);
	assert_int_equal(nkv_get32(&s->cdw10), 64);
	assert_int_equal(nkv_get32(&s->cdw12), 30);
	assert_int_equal(nkv_get32(&s->cdw13), 0);
	s = sent_for("pin");
	assert_int_equal(s->opc, NKV_VS_STORE_TTL);
	assert_int_equal(nkv_get32(&s->cdw10), 32);
	assert_int_equal(nkv_sqe_kv_opts(s), NKV_STORE_MUST_EXIST);
	assert_int_equal(nkv_get32(&s->cdw12), 0);
	assert_int_equal(nkv_get32(&s->cdw13), NKV_TTL_PIN);
	s = sent_for("both");
	assert_int_equal(nkv_get32(&s->cdw12), 0xffffffffu);
	assert_int_equal(nkv_get32(&s->cdw13), NKV_TTL_PIN);
	assert_int_equal(sent_for("get")->opc, NKV_KV_RETRIEVE);

	/* statuses map as the sync calls' */
	fake_reset(0x081);
	set_op(&ops[0], NKV_OP_STORE, "q", v, 8);
	ops[0].flags = NKV_OP_PIN;
	ops[0].ttl_s = 5;
	assert_int_equal(nkv_engine_run(e, ops, 1), 1);
	assert_int_equal(ops[0].rc, -ENOSPC);
	assert_int_equal(ops[0].status, 0x081);
	fake_reset(0x002);
	assert_int_equal(nkv_engine_run(e, ops, 1), 1);
	assert_int_equal(ops[0].rc, -EINVAL);

	/* refused before anything is sent: unknown flag bits, flags or ttl_s on other ops; the whole
	 * batch stays unsent and the bad op's rc says why */
	fake_reset(0);
	set_op(&ops[0], NKV_OP_STORE, "ok", v, 8);
	set_op(&ops[1], NKV_OP_STORE, "bad", v, 8);
	ops[1].flags = 0x4;
	assert_int_equal(nkv_engine_run(e, ops, 2), -EINVAL);
	assert_int_equal(ops[0].rc, 0);
	assert_int_equal(ops[1].rc, -EINVAL);
	ops[1].flags = 0x80 | NKV_OP_PIN;
	assert_int_equal(nkv_engine_submit(e, ops, 2, 9), -EINVAL);
	set_op(&ops[1], NKV_OP_RETRIEVE, "r", v, 8);
	ops[1].ttl_s = 10;
	assert_int_equal(nkv_engine_run(e, ops, 2), -EINVAL);
	set_op(&ops[1], NKV_OP_DELETE, "d", NULL, 0);
	ops[1].flags = NKV_OP_PIN;
	assert_int_equal(nkv_engine_run(e, ops, 2), -EINVAL);
	set_op(&ops[1], NKV_OP_LIST, "", v, 64);
	ops[1].ttl_s = 1;
	assert_int_equal(nkv_engine_run(e, ops, 2), -EINVAL);
	set_op(&ops[1], NKV_OP_RETRIEVE, "r", v, 8); /* NKV_OP_HASH belongs to Store */
	ops[1].flags = NKV_OP_HASH;
	ops[1].offset = 9;
	assert_int_equal(nkv_engine_run(e, ops, 2), -EINVAL);
	set_op(&ops[1], NKV_OP_STORE, "s", v, 8); /* an offset on a Store without NKV_OP_HASH */
	ops[1].offset = 9;
	assert_int_equal(nkv_engine_run(e, ops, 2), -EINVAL);
	assert_int_equal(F.nsent, 0);

	/* NKV_OP_HASH: a Store TTL with CDW13 bit 1 and the hash in SQE bytes 23:16 (little-endian) */
	fake_reset(0);
	set_op(&ops[0], NKV_OP_STORE, "h", v, 8);
	ops[0].flags = NKV_OP_HASH;
	ops[0].offset = 0xfedcba9876543210ull;
	set_op(&ops[1], NKV_OP_STORE, "hp", v, 8);
	ops[1].flags = NKV_OP_HASH | NKV_OP_PIN;
	ops[1].ttl_s = 60;
	ops[1].offset = 7;
	assert_int_equal(nkv_engine_run(e, ops, 2), 0);
	s = sent_for("h");
	assert_int_equal(s->opc, NKV_VS_STORE_TTL);
	assert_int_equal(nkv_get32(&s->cdw12), NKV_TTL_DEFAULT);
	assert_int_equal(nkv_get32(&s->cdw13), NKV_TTL_HASH);
	static const uint8_t le[8] = {0x10, 0x32, 0x54, 0x76, 0x98, 0xba, 0xdc, 0xfe};
	assert_memory_equal((const uint8_t *)s + 16, le, 8);
	s = sent_for("hp");
	assert_int_equal(nkv_get32(&s->cdw12), 60);
	assert_int_equal(nkv_get32(&s->cdw13), NKV_TTL_HASH | NKV_TTL_PIN);
	assert_int_equal(nkv_get64(&s->mptr), 7);

	nkv_engine_destroy(e);
	fake_ctrl_free(ctrl);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(store_ttl_sync),
		cmocka_unit_test(store_ttl_async),
		cmocka_unit_test(engine_store_ttl),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
