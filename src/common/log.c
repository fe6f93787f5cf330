/* SPDX-License-Identifier: Apache-2.0 */
/* log.c - leveled logging: one line format, per-call-site rate limiting, stderr or syslog (log.h). */
#include "log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#define LINE_MAX_MSG 1024
#define SLOTS 128      /* call sites tracked at once; a collision just ends the older site's window */
#define SLOT_TEXT 512  /* message kept for the count line */

/* Rate-limit state of one call site, under g_lock. */
struct site {
	const char *fmt;        /* key; NULL = free */
	const char *origin, *component, *file;
	enum nkv_log_level lvl;
	uint64_t start_ms;      /* window start (monotonic) */
	uint64_t last_hash;     /* of the last printed message: identical lines are repeats */
	unsigned printed;       /* lines printed in this window */
	unsigned repeats;       /* identical to the last printed line, suppressed */
	unsigned similar;       /* different lines past the burst, suppressed */
	char text[SLOT_TEXT];   /* last printed message, or the last suppressed one once similar > 0 */
};

static atomic_int g_level = -1; /* -1: not yet read from the environment */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct site g_sites[SLOTS];
static const char *g_syslog_ident; /* non-NULL: lines go to syslog(3) */
static uint64_t g_next_end = UINT64_MAX; /* earliest end of an open window: most lines skip the scan */

static const char *const g_names[] = {"error", "warn", "info", "debug"};

const char *nkv_log_level_name(enum nkv_log_level lvl)
{
	return (unsigned)lvl < 4 ? g_names[lvl] : "?";
}

void nkv_log_set_level(enum nkv_log_level lvl)
{
	atomic_store(&g_level, (int)lvl);
}

static int level(void)
{
	int l = atomic_load(&g_level);
	if (l < 0) {
		const char *e = getenv("NKV_LOG_LEVEL");
		l = (e && *e >= '0' && *e <= '3') ? *e - '0' : NKV_LOG_WARN;
		atomic_store(&g_level, l);
	}
	return l;
}

int nkv_log_enabled(enum nkv_log_level lvl)
{
	return (int)lvl <= level();
}

void nkv_log_to_syslog(const char *ident)
{
	pthread_mutex_lock(&g_lock);
	openlog(ident, LOG_PID | LOG_NDELAY, LOG_DAEMON);
	g_syslog_ident = ident;
	pthread_mutex_unlock(&g_lock);
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint64_t hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	return h;
}

/* The directory holding @file ("src/transport/tcp.c" -> "transport"), into @out. */
static const char *dir_of(const char *file, char *out, size_t len)
{
	const char *end = strrchr(file, '/'), *start;
	if (!end)
		return "nkv";
	for (start = end; start > file && start[-1] != '/'; start--)
		;
	snprintf(out, len, "%.*s", (int)(end - start), start);
	return out;
}

/* Write one formatted line. Caller holds g_lock (so lines never interleave). */
static void emit(const char *origin, const char *component, const char *file, enum nkv_log_level lvl,
		 const char *msg, const char *suffix)
{
	static const int prio[] = {LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG};
	char dir[64];

	if (!component)
		component = dir_of(file, dir, sizeof(dir));
	if (g_syslog_ident) {
		/* syslog adds time, ident and pid; name the origin only when it is not the ident */
		bool other = strcmp(origin, g_syslog_ident) != 0;
		syslog(prio[lvl], "%s%s%s %s: %s%s", other ? origin : "", other ? " " : "", g_names[lvl], component,
		       msg, suffix);
		return;
	}
	struct timespec ts;
	struct tm tm;
	char stamp[32];
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
	fprintf(stderr, "%s.%03ldZ %s[%ld] %s %s: %s%s\n", stamp, ts.tv_nsec / 1000000, origin, (long)getpid(),
		g_names[lvl], component, msg, suffix);
}

/* Report what @s suppressed, and free it for a new window. Caller holds g_lock. */
static void site_close(struct site *s, uint64_t now)
{
	char suffix[128];
	unsigned secs = (unsigned)((now - s->start_ms + 999) / 1000);

	if (s->similar)
		snprintf(suffix, sizeof(suffix), " (the last of %u similar messages suppressed in the last %u s)",
			 s->repeats + s->similar, secs);
	else if (s->repeats)
		snprintf(suffix, sizeof(suffix), " (repeated %u times in the last %u s)", s->repeats, secs);
	if (s->repeats || s->similar)
		emit(s->origin, s->component, s->file, s->lvl, s->text, suffix);
	s->fmt = NULL;
}

/* Close every window that has ended (all of them with @all). Caller holds g_lock. */
static void close_ended(uint64_t now, bool all)
{
	if (!all && now < g_next_end)
		return;
	g_next_end = UINT64_MAX;
	for (unsigned i = 0; i < SLOTS; i++) {
		struct site *s = &g_sites[i];
		if (s->fmt && (all || now - s->start_ms >= NKV_LOG_WINDOW_MS))
			site_close(s, now);
		else if (s->fmt && s->start_ms + NKV_LOG_WINDOW_MS < g_next_end)
			g_next_end = s->start_ms + NKV_LOG_WINDOW_MS;
	}
}

void nkv_log_tick(void)
{
	pthread_mutex_lock(&g_lock);
	close_ended(now_ms(), false);
	pthread_mutex_unlock(&g_lock);
}

void nkv_log_flush(void)
{
	pthread_mutex_lock(&g_lock);
	close_ended(now_ms(), true);
	pthread_mutex_unlock(&g_lock);
	fflush(stderr);
}

/* Keep (the start of) @msg for the count line; longer messages are cut there on purpose. */
static void keep(struct site *s, const char *msg)
{
	size_t n = strnlen(msg, sizeof(s->text) - 1);
	memcpy(s->text, msg, n);
	s->text[n] = 0;
}

/* Should @msg from call site @fmt print now? Counts it otherwise. Caller holds g_lock. */
static bool admit(const char *origin, const char *component, const char *file, enum nkv_log_level lvl,
		  const char *fmt, const char *msg, uint64_t now)
{
	struct site *s = &g_sites[((uintptr_t)fmt >> 3) % SLOTS];
	uint64_t h = hash(msg);

	if (s->fmt && s->fmt != fmt)
		site_close(s, now); /* another site hashed here: its count prints early, nothing is lost */
	if (!s->fmt) {
		*s = (struct site){.fmt = fmt, .origin = origin, .component = component, .file = file, .lvl = lvl,
				   .start_ms = now, .last_hash = h, .printed = 1};
		keep(s, msg);
		if (now + NKV_LOG_WINDOW_MS < g_next_end)
			g_next_end = now + NKV_LOG_WINDOW_MS;
		return true;
	}
	if (h == s->last_hash && !s->similar) {
		s->repeats++;
		return false;
	}
	if (s->printed < NKV_LOG_BURST && !s->similar) {
		s->printed++;
		s->last_hash = h;
		keep(s, msg);
		return true;
	}
	s->similar++;
	keep(s, msg);
	return false;
}

void nkv_log_at(const char *origin, const char *component, const char *file, enum nkv_log_level lvl,
		const char *fmt, ...)
{
	char msg[LINE_MAX_MSG];
	va_list ap;

	if (!nkv_log_enabled(lvl))
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&g_lock);
	uint64_t now = now_ms();
	close_ended(now, false);
	if (lvl == NKV_LOG_DEBUG || admit(origin, component, file, lvl, fmt, msg, now))
		emit(origin, component, file, lvl, msg, "");
	pthread_mutex_unlock(&g_lock);
}
