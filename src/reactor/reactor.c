/* SPDX-License-Identifier: Apache-2.0 */
/* reactor.c - epoll event loop thread with a message queue and a tick (see reactor.h). */
#include "reactor.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/spin_pay.h"

#define MAX_EVENTS 64

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/*
 * Polling after work (r->poll_us). A reactor that blocks in epoll_wait pays a wake-up for the next
 * command of a QD 1 stream (about 20 us of a 45 us p50 on this project's VM: most of the gap to a
 * polling target such as SPDK's). After work it may instead look again without blocking for up to
 * poll_us (a "window"), but only while windows find the next work (common/spin_pay.h): a stream
 * whose commands are further apart than the window (a RADOS op, a client that thinks) stops
 * polling after about 20 windows, so the core it burns is spent only where it buys latency.
 */
static void poll_after(struct nkv_spin_window *w, bool work)
{
	if (!w->ns)
		return;
	if (work)
		nkv_spin_window_work(w, true, nkv_now_ns());
	else
		(void)nkv_spin_window_open(w, nkv_now_ns()); /* closes one that ran out */
}

static void msgq_ready(struct nkv_event *ev, uint32_t events)
{
	struct nkv_reactor *r = (struct nkv_reactor *)((char *)ev - offsetof(struct nkv_reactor, msgq_ev));
	(void)events;
	nkv_msgq_ack(&r->msgq); /* the loop runs the messages after this batch of events */
}

/* A lent completion ran on a producer's thread: flush what it queued, as the loop would. */
static void lent_after(void *arg)
{
	struct nkv_reactor *r = arg;
	r->flush(r);
}

static void *loop(void *arg)
{
	struct nkv_reactor *r = arg;
	struct epoll_event evs[MAX_EVENTS];
	uint64_t next_tick = now_ms() + r->tick_ms;
	struct nkv_spin_window ps;
	char name[16];

	nkv_spin_window_init(&ps, (uint64_t)r->poll_us * 1000);
	snprintf(name, sizeof(name), "nkv-reactor%u", r->id % 1000);
	pthread_setname_np(pthread_self(), name);

	/* While we block in epoll_wait, a backend completion may run on its own thread instead of
	 * waking us (nkv_msgq_send_or_run): at QD 1 that wake-up was 20-48 us of each command. */
	nkv_msgq_lend(&r->msgq, r->flush ? lent_after : NULL, r);
	for (;;) {
		if (atomic_load_explicit(&r->stop, memory_order_acquire) && (!r->done || r->done(r)))
			break;
		uint64_t now = now_ms();
		int timeout = now >= next_tick ? 0 : (int)(next_tick - now);
		/* Producers write the message queue's eventfd only while we say we sleep. */
		bool sleep = timeout && !ps.until && nkv_msgq_sleep_begin(&r->msgq);
		if (sleep) {
			atomic_fetch_add_explicit(&r->waits, 1, memory_order_relaxed);
			nkv_msgq_unlock(&r->msgq);
		}
		int n = epoll_wait(r->epfd, evs, MAX_EVENTS, sleep ? timeout : 0);
		int err = errno;
		if (sleep) {
			nkv_msgq_sleep_end(&r->msgq);
			nkv_msgq_lock(&r->msgq);
		}

		for (int i = 0; i < n; i++) {
			struct nkv_event *ev = evs[i].data.ptr;
			ev->fn(ev, evs[i].events);
		}
		if (n < 0 && err != EINTR)
			NKV_ERR("reactor %u: epoll_wait: %s", r->id, strerror(err));
		/* completions and hand-offs, whether or not the eventfd fired */
		int ran = nkv_msgq_poll(&r->msgq, 0);
		poll_after(&ps, n > 0 || ran > 0);
		if (r->idle)
			r->idle(r);
		if (now_ms() >= next_tick) {
			if (r->tick)
				r->tick(r);
			next_tick = now_ms() + r->tick_ms;
		}
	}
	nkv_msgq_unlend(&r->msgq);
	return NULL;
}

int nkv_reactor_start(struct nkv_reactor *r, unsigned id)
{
	int rc;

	r->id = id;
	atomic_init(&r->stop, false);
	if (!r->tick_ms)
		r->tick_ms = 100;
	if ((r->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0)
		return -errno;
	if ((rc = nkv_msgq_init(&r->msgq)) < 0) {
		close(r->epfd);
		return rc;
	}
	r->msgq_ev.fn = msgq_ready;
	if ((rc = nkv_reactor_add(r, r->msgq.efd, EPOLLIN, &r->msgq_ev)) < 0 ||
	    (rc = -pthread_create(&r->thread, NULL, loop, r)) < 0) {
		nkv_msgq_fini(&r->msgq);
		close(r->epfd);
		return rc;
	}
	return 0;
}

void nkv_reactor_stop(struct nkv_reactor *r)
{
	atomic_store_explicit(&r->stop, true, memory_order_release);
	pthread_join(r->thread, NULL);
}

void nkv_reactor_fini(struct nkv_reactor *r)
{
	nkv_msgq_fini(&r->msgq);
	close(r->epfd);
}

int nkv_reactor_add(struct nkv_reactor *r, int fd, uint32_t events, struct nkv_event *ev)
{
	struct epoll_event e = {.events = events, .data.ptr = ev};
	return epoll_ctl(r->epfd, EPOLL_CTL_ADD, fd, &e) < 0 ? -errno : 0;
}

int nkv_reactor_mod(struct nkv_reactor *r, int fd, uint32_t events, struct nkv_event *ev)
{
	struct epoll_event e = {.events = events, .data.ptr = ev};
	return epoll_ctl(r->epfd, EPOLL_CTL_MOD, fd, &e) < 0 ? -errno : 0;
}

void nkv_reactor_del(struct nkv_reactor *r, int fd)
{
	epoll_ctl(r->epfd, EPOLL_CTL_DEL, fd, NULL);
}
