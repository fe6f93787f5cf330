/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tcp_poll.c - the NVMe/TCP reactor's polling after work (--tcp-poll-us; src/reactor/reactor.c).
 *
 * Against the daemon on the mem backend, with libnkv as the host:
 *  - wakeups: a QD 1 stream of Store + Retrieve pairs. Without polling every command wakes a
 *    reactor from epoll_wait (its voluntary context switches count them; at least a quarter must
 *    show, the check that the measure sees them); with --tcp-poll-us 1000 the reactor is still looking when the next command comes,
 *    and the switches fall under an eighth of the commands. The best of 3 rounds counts: on a
 *    loaded machine a round can lose its core to other work, and polling stops by design when
 *    windows stop paying.
 *  - adapts: with --tcp-poll-us 2000, commands 3 ms apart (a RADOS op's distance, or a thinking
 *    client): every window would burn 2 ms of the reactor's CPU per command; the reactor must stop
 *    opening them and use under a third of that.
 *
 *     tcp_poll PATH/rados-nkv
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nkv/nkv.h"

#include "check.h"
#include "daemon_spawn.h"

#define NQN "nqn.2026-12.io.rados-nkv:tcp-poll"

unsigned h_pass, h_fail;
#define PAIRS 1000 /* Store + Retrieve pairs per wake-up round */
#define SLOW_CMDS 300
#define SLOW_GAP_US 3000

struct daemon {
	pid_t pid;
	char port[8];
	struct nkv_ctrl *ctrl;
	struct nkv_qpair *qp;
};

/* Sum over the daemon's reactor threads of a /proc/PID/task/TID field: voluntary context switches
 * (@cpu false) or user + system CPU in ms (@cpu true). */
static long reactor_sum(pid_t pid, bool cpu)
{
	char path[320], buf[1024];
	long sum = 0;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	if (!d)
		return -1;
	for (struct dirent *e; (e = readdir(d));) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/comm", (int)pid, e->d_name);
		FILE *f = fopen(path, "r");
		bool reactor = f && fgets(buf, sizeof(buf), f) && strncmp(buf, "nkv-reactor", 11) == 0;
		if (f)
			fclose(f);
		if (!reactor)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/%s", (int)pid, e->d_name, cpu ? "stat" : "status");
		if (!(f = fopen(path, "r")))
			continue;
		if (cpu) {
			/* fields 14 and 15 (utime, stime) after the ")" that ends the name */
			unsigned long ut = 0, st = 0;
			if (fgets(buf, sizeof(buf), f) && strrchr(buf, ')') &&
			    sscanf(strrchr(buf, ')') + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut,
				   &st) == 2)
				sum += (long)((ut + st) * 1000 / (unsigned long)sysconf(_SC_CLK_TCK));
		} else {
			long v;
			while (fgets(buf, sizeof(buf), f))
				if (sscanf(buf, "voluntary_ctxt_switches: %ld", &v) == 1)
					sum += v;
		}
		fclose(f);
	}
	closedir(d);
	return sum;
}

static bool daemon_up(struct daemon *d, const char *bin, const char *poll_us)
{
	unsigned port = daemon_free_port();
	snprintf(d->port, sizeof(d->port), "%u", port);
	char listen[32];
	snprintf(listen, sizeof(listen), "127.0.0.1:%u", port);
	const char *argv[] = {bin, "--backend", "mem", "--control", "none", "-l", listen, "-d", "none",
			      "--tcp-poll-us", poll_us, "-s", NQN, "--allow-any-host", NULL};
	d->pid = daemon_spawn(argv, NULL, NULL);
	CHECK(d->pid > 0 && daemon_wait_port(d->pid, (int)port), "daemon with --tcp-poll-us %s", poll_us);
	if (d->pid <= 0)
		return false;
	int rc = nkv_connect("127.0.0.1", d->port, NQN, NULL, &d->ctrl);
	CHECK(rc == 0, "connect: %s", strerror(-rc));
	if (rc)
		return false;
	rc = nkv_qpair_create(d->ctrl, 4, &d->qp);
	CHECK(rc == 0, "queue pair: %s", strerror(-rc));
	return rc == 0;
}

static void daemon_down(struct daemon *d)
{
	if (d->ctrl)
		nkv_disconnect(d->ctrl);
	if (d->pid > 0)
		daemon_stop(d->pid, 10);
}

/* @n QD 1 commands (Stores and Retrieves in turn), @gap_us apart. @return the failures. */
static unsigned stream(struct daemon *d, unsigned n, unsigned gap_us)
{
	uint8_t val[4096], out[4096];
	unsigned bad = 0;

	memset(val, 0xa5, sizeof(val));
	for (unsigned i = 0; i < n; i++) {
		char key[16];
		snprintf(key, sizeof(key), "k%06u", i / 2);
		uint32_t len = 0;
		int rc = i % 2 ? nkv_retrieve(d->qp, 1, key, (unsigned)strlen(key), out, sizeof(out), &len, NULL)
			       : nkv_store(d->qp, 1, key, (unsigned)strlen(key), val, sizeof(val), 0, NULL);
		bad += rc != 0 || (i % 2 && (len != sizeof(val) || memcmp(out, val, len)));
		if (gap_us)
			nanosleep(&(struct timespec){0, (long)gap_us * 1000}, NULL);
	}
	return bad;
}

/* The fewest reactor wake-ups seen in 3 rounds of PAIRS Store + Retrieve pairs. */
static long min_wakeups(struct daemon *d)
{
	long best = -1;
	for (int r = 0; r < 3; r++) {
		long before = reactor_sum(d->pid, false);
		unsigned bad = stream(d, 2 * PAIRS, 0);
		long w = reactor_sum(d->pid, false) - before;
		CHECK(bad == 0 && before >= 0, "round %d: %u commands failed", r, bad);
		if (best < 0 || w < best)
			best = w;
	}
	return best;
}

static void test_wakeups(const char *bin)
{
	struct daemon off = {0}, on = {0};
	long w_off = -1, w_on = -1;

	if (daemon_up(&off, bin, "0"))
		w_off = min_wakeups(&off);
	daemon_down(&off);
	if (daemon_up(&on, bin, "1000"))
		w_on = min_wakeups(&on);
	daemon_down(&on);
	printf("wakeups: %d commands: %ld reactor wake-ups without polling, %ld with --tcp-poll-us 1000\n",
	       2 * PAIRS, w_off, w_on);
	CHECK(w_off >= 2 * PAIRS / 4, "without polling most commands wake the reactor: %ld of %d", w_off, 2 * PAIRS);
	CHECK(w_on >= 0 && w_on <= 2 * PAIRS / 8, "with polling: %ld wake-ups for %d commands", w_on, 2 * PAIRS);
}

static void test_adapts(const char *bin)
{
	struct daemon d = {0};

	if (daemon_up(&d, bin, "2000")) {
		long before = reactor_sum(d.pid, true);
		unsigned bad = stream(&d, SLOW_CMDS, SLOW_GAP_US);
		long ms = reactor_sum(d.pid, true) - before;
		long always = (long)SLOW_CMDS * 2; /* a 2 ms window after every command */
		printf("adapts: %d commands %d us apart: the reactors used %ld ms of CPU (polling after every "
		       "command: about %ld)\n", SLOW_CMDS, SLOW_GAP_US, ms, always);
		CHECK(bad == 0, "%u commands failed", bad);
		CHECK(before >= 0 && ms < always / 3, "reactor CPU %ld ms, polling must stop paying its windows", ms);
	}
	daemon_down(&d);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: tcp_poll PATH/rados-nkv\n");
		return 2;
	}
	test_wakeups(argv[1]);
	test_adapts(argv[1]);
	printf("%u passed, %u failed\n", h_pass, h_fail);
	return h_fail ? 1 : 0;
}
