/* test_msgq.c - the MPSC completion hand-off: every message from every producer runs once, on the
 * consumer, in per-producer order. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

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

int main(void)
{
	const struct CMUnitTest tests[] = {cmocka_unit_test(many_producers)};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
