/* SPDX-License-Identifier: Apache-2.0 */
/* test_msgq.c - the MPSC completion hand-off: every message from every producer runs once, on the
 * consumer, in per-producer order; a busy consumer costs producers no eventfd write; a sleeping
 * consumer is always woken (thousands of sleep/wake cycles, through nkv_msgq_poll and through the
 * sleep_begin/ppoll/ack protocol the reactors and shm pollers use); a lending consumer's messages run
 * on the producer only while the consumer waits, one at a time with the consumer's own work, and
 * each exactly once. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>
#include <poll.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "reactor/msgq.h"

#define PRODUCERS 4
#define PER 50000

struct item {
	struct nkv_msg msg;
	int producer, seq;
};

static struct nkv_msgq Q;
static int last_seq[PRODUCERS];
static int ran, order_errors;

static void on_msg(struct nkv_msg *m)
{
	struct item *it = (struct item *)m;
	if (it->seq != last_seq[it->producer] + 1)
		order_errors++;
	last_seq[it->producer] = it->seq;
	ran++;
}

static void *producer(void *arg)
{
	struct item *items = arg;
	for (int i = 0; i < PER; i++)
		nkv_msgq_send(&Q, &items[i].msg, on_msg);
	return NULL;
}

static void many_producers(void **state)
{
	(void)state;
	pthread_t th[PRODUCERS];
	struct item *items = calloc(PRODUCERS * PER, sizeof(*items));
	assert_int_equal(nkv_msgq_init(&Q), 0);
	assert_int_equal(nkv_msgq_poll(&Q, 0), 0);
	assert_int_equal(nkv_msgq_poll(&Q, 10), -ETIMEDOUT);
	for (int p = 0; p < PRODUCERS; p++) {
		last_seq[p] = -1;
		for (int i = 0; i < PER; i++)
			items[p * PER + i] = (struct item){.producer = p, .seq = i};
		pthread_create(&th[p], NULL, producer, &items[p * PER]);
	}
	int polls = 0;
	while (ran < PRODUCERS * PER && polls++ < 10000000)
		nkv_msgq_poll(&Q, 1000);
	for (int p = 0; p < PRODUCERS; p++)
		pthread_join(th[p], NULL);
	nkv_msgq_poll(&Q, 0);
	assert_int_equal(ran, PRODUCERS * PER);
	assert_int_equal(order_errors, 0);
	nkv_msgq_fini(&Q);
	free(items);
}

static int efd_readable(void)
{
	struct pollfd p = {.fd = Q.efd, .events = POLLIN};
	return poll(&p, 1, 0);
}

static void busy_consumer(void **state)
{
	(void)state;
	struct item it[3];
	assert_int_equal(nkv_msgq_init(&Q), 0);
	ran = 0;
	last_seq[0] = -1;
	for (int i = 0; i < 3; i++) {
		it[i] = (struct item){.producer = 0, .seq = i};
		nkv_msgq_send(&Q, &it[i].msg, on_msg);
	}
	assert_int_equal(efd_readable(), 0); /* nobody slept: no eventfd write */
	assert_false(nkv_msgq_sleep_begin(&Q)); /* pending: must not block */
	assert_int_equal(nkv_msgq_poll(&Q, 0), 3);
	assert_true(nkv_msgq_sleep_begin(&Q)); /* drained: may block */
	it[0].seq = 3;
	nkv_msgq_send(&Q, &it[0].msg, on_msg);
	assert_int_equal(efd_readable(), 1); /* a sleeper is woken */
	nkv_msgq_sleep_end(&Q);
	nkv_msgq_ack(&Q);
	assert_int_equal(efd_readable(), 0);
	assert_int_equal(nkv_msgq_poll(&Q, 0), 1);
	assert_int_equal(ran, 4);
	assert_int_equal(order_errors, 0);
	nkv_msgq_fini(&Q);
}

#define CYCLES 3000
static atomic_int consumed;

/* One message at a time, after the consumer took the previous one and a random gap of 0-200 us, so
 * that sends land before, during and after the consumer's announcement. */
static void *pinger(void *arg)
{
	struct item *it = arg;
	unsigned seed = 12345;
	for (int i = 0; i < CYCLES; i++) {
		while (atomic_load(&consumed) < i)
			;
		struct timespec ts = {0, (long)(rand_r(&seed) % 200) * 1000};
		if (ts.tv_nsec > 100000)
			nanosleep(&ts, NULL);
		it[i] = (struct item){.producer = 0, .seq = i};
		nkv_msgq_send(&Q, &it[i].msg, on_msg);
	}
	return NULL;
}

static void wake_cycles(int external)
{
	pthread_t th;
	struct item *it = calloc(CYCLES, sizeof(*it));
	int timeouts = 0;
	assert_int_equal(nkv_msgq_init(&Q), 0);
	ran = 0;
	last_seq[0] = -1;
	atomic_store(&consumed, 0);
	pthread_create(&th, NULL, pinger, it);
	while (ran < CYCLES && timeouts < 3) {
		int n;
		if (external) { /* what the shm poller does: its own ppoll on the eventfd */
			n = nkv_msgq_poll(&Q, 0);
			if (!n && nkv_msgq_sleep_begin(&Q)) {
				struct pollfd p = {.fd = Q.efd, .events = POLLIN};
				struct timespec ts = {2, 0};
				int r = ppoll(&p, 1, &ts, NULL);
				nkv_msgq_sleep_end(&Q);
				if (r > 0)
					nkv_msgq_ack(&Q);
				else if (nkv_msgq_poll(&Q, 0) == 0)
					timeouts++; /* 2 s asleep with a message waiting: a lost wakeup */
			}
		} else if ((n = nkv_msgq_poll(&Q, 2000)) == -ETIMEDOUT) {
			timeouts++;
		}
		atomic_store(&consumed, ran);
	}
	pthread_join(th, NULL);
	assert_int_equal(timeouts, 0);
	assert_int_equal(ran, CYCLES);
	assert_int_equal(order_errors, 0);
	nkv_msgq_fini(&Q);
	free(it);
}

static void wake_cycles_poll(void **state)
{
	(void)state;
	wake_cycles(0);
}

static void wake_cycles_external(void **state)
{
	(void)state;
	wake_cycles(1);
}

/* ---- lending ---- */

static pthread_t ran_on;
static int afters;

static void on_lent(struct nkv_msg *m)
{
	on_msg(m);
	ran_on = pthread_self();
}

static void count_after(void *arg)
{
	(*(int *)arg)++;
}

struct one_send {
	struct item *it;
	nkv_msg_fn fn;
};

static void *send_one(void *arg)
{
	struct one_send *o = arg;
	nkv_msgq_send_or_run(&Q, &o->it->msg, o->fn);
	return NULL;
}

static void send_from_thread(struct item *it, nkv_msg_fn fn, pthread_t *th)
{
	struct one_send o = {it, fn};
	pthread_create(th, NULL, send_one, &o);
	pthread_join(*th, NULL);
}

static void lend_runs_on_producer(void **state)
{
	(void)state;
	struct item it[4];
	pthread_t th;
	assert_int_equal(nkv_msgq_init(&Q), 0);
	ran = afters = 0;
	last_seq[0] = -1;
	for (int i = 0; i < 4; i++)
		it[i] = (struct item){.producer = 0, .seq = i};

	nkv_msgq_send_or_run(&Q, &it[0].msg, on_lent); /* not lending: queued */
	assert_int_equal(ran, 0);
	assert_int_equal(nkv_msgq_poll(&Q, 0), 1);

	nkv_msgq_lend(&Q, count_after, &afters);
	nkv_msgq_send_or_run(&Q, &it[1].msg, on_lent); /* from the consumer while it runs (an inline backend) */
	assert_int_equal(ran, 1);
	assert_int_equal(nkv_msgq_poll(&Q, 0), 1);
	assert_int_equal(afters, 0);

	assert_true(nkv_msgq_sleep_begin(&Q)); /* the consumer waits: it lends */
	nkv_msgq_unlock(&Q);
	send_from_thread(&it[2], on_lent, &th);
	assert_int_equal(ran, 3);
	assert_true(pthread_equal(ran_on, th)); /* ran on the producer */
	assert_int_equal(afters, 1);            /* followed by the consumer's after-work */
	assert_int_equal(efd_readable(), 0);    /* and nobody was woken */
	nkv_msgq_sleep_end(&Q);
	nkv_msgq_lock(&Q);
	assert_int_equal(nkv_msgq_poll(&Q, 0), 0);

	nkv_msgq_unlend(&Q); /* an exiting consumer: queued again, even though nobody holds the lock */
	send_from_thread(&it[3], on_lent, &th);
	assert_int_equal(ran, 3);
	assert_int_equal(nkv_msgq_poll(&Q, 0), 1);
	assert_int_equal(order_errors, 0);
	assert_int_equal(afters, 1);
	nkv_msgq_fini(&Q);
}

/* Producers race a consumer that works a while (holding its lock) after each wake-up and then sleeps:
 * every message runs once, never two at a time (the consumer's state is touched by one thread at a
 * time), and none waits for a timeout. Which path each message takes depends on timing, so the
 * split is printed, not asserted (lend_runs_on_producer checks each path deterministically). */
#define LEND_PRODUCERS 3
#define LEND_PER 20000
static atomic_int inside, overlaps;
static int owned; /* consumer state: plain int, lost updates would show a broken lock */

static void on_owned(struct nkv_msg *m)
{
	(void)m;
	if (atomic_exchange(&inside, 1))
		atomic_fetch_add(&overlaps, 1);
	owned++;
	atomic_store(&inside, 0);
}

static void *lend_producer(void *arg)
{
	struct item *items = arg;
	for (int i = 0; i < LEND_PER; i++) {
		nkv_msgq_send_or_run(&Q, &items[i].msg, on_owned);
		if (i % 64 == 0)
			usleep(50); /* let the consumer go to sleep now and then */
	}
	return NULL;
}

static void spin_us(long us)
{
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do
		clock_gettime(CLOCK_MONOTONIC, &t);
	while ((t.tv_sec - t0.tv_sec) * 1000000L + (t.tv_nsec - t0.tv_nsec) / 1000 < us);
}

static void lend_race(void **state)
{
	(void)state;
	pthread_t th[LEND_PRODUCERS];
	struct item *items = calloc(LEND_PRODUCERS * LEND_PER, sizeof(*items));
	int timeouts = 0, queued = 0;
	assert_int_equal(nkv_msgq_init(&Q), 0);
	owned = afters = 0;
	nkv_msgq_lend(&Q, count_after, &afters);
	for (int p = 0; p < LEND_PRODUCERS; p++)
		pthread_create(&th[p], NULL, lend_producer, &items[p * LEND_PER]);
	while (owned < LEND_PRODUCERS * LEND_PER && timeouts < 3) {
		int n = nkv_msgq_poll(&Q, 0);
		queued += n;
		spin_us(20); /* the consumer's own work, lock held: producers queue meanwhile */
		if (n || !nkv_msgq_sleep_begin(&Q))
			continue;
		nkv_msgq_unlock(&Q);
		struct pollfd p = {.fd = Q.efd, .events = POLLIN};
		struct timespec ts = {2, 0};
		int r = ppoll(&p, 1, &ts, NULL);
		nkv_msgq_sleep_end(&Q);
		nkv_msgq_lock(&Q);
		if (r > 0)
			nkv_msgq_ack(&Q);
		else if ((n = nkv_msgq_poll(&Q, 0)) == 0 && owned < LEND_PRODUCERS * LEND_PER)
			timeouts++; /* asleep 2 s with a message queued: a lost wake-up */
		queued += n > 0 ? n : 0;
	}
	for (int p = 0; p < LEND_PRODUCERS; p++)
		pthread_join(th[p], NULL);
	queued += nkv_msgq_poll(&Q, 0);
	nkv_msgq_unlend(&Q);
	nkv_msgq_fini(&Q);
	free(items);
	print_message("lend_race: %d of %d ran on producers, %d on the consumer\n", afters,
		      LEND_PRODUCERS * LEND_PER, queued);
	assert_int_equal(timeouts, 0);
	assert_int_equal(owned, LEND_PRODUCERS * LEND_PER);
	assert_int_equal(afters + queued, owned); /* each ran once, by one of the two paths */
	assert_int_equal(atomic_load(&overlaps), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {cmocka_unit_test(many_producers), cmocka_unit_test(busy_consumer),
					   cmocka_unit_test(wake_cycles_poll), cmocka_unit_test(wake_cycles_external),
					   cmocka_unit_test(lend_runs_on_producer), cmocka_unit_test(lend_race)};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
