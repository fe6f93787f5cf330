/* SPDX-License-Identifier: Apache-2.0 */
/*
 * reactor.h - one event-loop thread: epoll over the file descriptors it owns, a message queue that
 * other threads (librados callbacks, the acceptor) use to hand work to it, and a periodic tick.
 * Everything registered with a reactor is touched only by its thread, or by a backend thread that
 * runs a completion while the reactor blocks in epoll_wait (it lends its state: msgq.h).
 */
#ifndef NKV_REACTOR_H
#define NKV_REACTOR_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "reactor/msgq.h"

struct nkv_reactor;

/** Embed in an object registered with epoll; @fn runs on the reactor thread with the events. */
struct nkv_event {
	void (*fn)(struct nkv_event *ev, uint32_t events);
};

struct nkv_reactor {
	unsigned id;
	int epfd;
	pthread_t thread;
	struct nkv_msgq msgq;          /* completions and hand-offs to this thread */
	struct nkv_event msgq_ev;
	atomic_bool stop;              /* set by nkv_reactor_stop(); the loop exits when done() agrees */
	unsigned tick_ms;
	unsigned poll_us;              /* after work, look again without blocking this long (0: block at
					* once); only while it pays (reactor.c, "Polling after work") */
	atomic_uint_fast64_t waits;    /* times the loop blocked in epoll_wait (metrics) */
	void (*tick)(struct nkv_reactor *r);  /* periodic work (timers, teardown) */
	void (*idle)(struct nkv_reactor *r);  /* after each batch of events: flush deferred work */
	/* After a backend completion that ran on the backend's thread while this one blocked
	 * (nkv_msgq_send_or_run): send what it queued. Must free nothing: an event epoll has already
	 * returned to the blocked thread may name it. */
	void (*flush)(struct nkv_reactor *r);
	int (*done)(struct nkv_reactor *r);   /* after stop: nonzero when nothing is left to finish */
	void *ctx;                     /* owner's per-reactor state */
};

/** Create the epoll set and message queue and start the thread. @return 0 or -errno. */
int nkv_reactor_start(struct nkv_reactor *r, unsigned id);
/** Ask the loop to exit once r->done() says so, and join it. Then free with nkv_reactor_fini(). */
void nkv_reactor_stop(struct nkv_reactor *r);
void nkv_reactor_fini(struct nkv_reactor *r);

/** epoll_ctl wrappers. @return 0 or -errno. */
int nkv_reactor_add(struct nkv_reactor *r, int fd, uint32_t events, struct nkv_event *ev);
int nkv_reactor_mod(struct nkv_reactor *r, int fd, uint32_t events, struct nkv_event *ev);
void nkv_reactor_del(struct nkv_reactor *r, int fd);

#endif
