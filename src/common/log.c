/* log.c - leveled logging to stderr. */
#include "log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

static atomic_int g_level = -1; /* -1: not yet read from the environment */

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

void nkv_log(enum nkv_log_level lvl, const char *fmt, ...)
{
	static const char *const names[] = {"error", "warn", "info", "debug"};
	char line[1024];
	va_list ap;

	if ((int)lvl > level())
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "rados-nkv %s: %s\n", names[lvl], line);
}
