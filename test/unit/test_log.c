/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_log.c - the log format and its rate limiter (issue 17 finding 11): ISO-8601 UTC timestamp,
 * origin[pid], level, component; the level filter; 200 identical lines become one line and one
 * "repeated 199 times" line; a burst of different lines from one call site is capped with a count;
 * libnkv's own lines (a failed nkv_connect) say "libnkv", never the daemon's name.
 * stderr is redirected to a temporary file and read back.
 */
#include <errno.h>
#include <regex.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "common/log.h"
#include "nkv/nkv.h"

static char g_out[1 << 16];
static int g_saved_fd = -1;
static FILE *g_cap;

/* Send stderr to a fresh temporary file until end_capture(). */
static void begin_capture(void)
{
	fflush(stderr);
	g_cap = tmpfile();
	assert_non_null(g_cap);
	g_saved_fd = dup(2);
	dup2(fileno(g_cap), 2);
}

/* Restore stderr; the captured text is in g_out. @return its number of lines. */
static int end_capture(void)
{
	fflush(stderr);
	dup2(g_saved_fd, 2);
	close(g_saved_fd);
	rewind(g_cap);
	size_t n = fread(g_out, 1, sizeof(g_out) - 1, g_cap);
	g_out[n] = 0;
	fclose(g_cap);
	int lines = 0;
	for (size_t i = 0; i < n; i++)
		lines += g_out[i] == '\n';
	return lines;
}

static void assert_matches(const char *text, const char *ere)
{
	regex_t re;
	assert_int_equal(regcomp(&re, ere, REG_EXTENDED | REG_NEWLINE | REG_NOSUB), 0);
	int rc = regexec(&re, text, 0, NULL, 0);
	regfree(&re);
	if (rc != 0)
		fail_msg("no line of\n%s\nmatches /%s/", text, ere);
}

#define STAMP "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z"

static void format(void **state)
{
	(void)state;
	nkv_log_set_level(NKV_LOG_DEBUG);
	begin_capture();
	NKV_WARN("hello %d", 42);
	nkv_log_at("rados-nkv", "tcp", __FILE__, NKV_LOG_ERROR, "explicit component");
	assert_int_equal(end_capture(), 2);
	/* the component defaults to the caller's directory: this file is in test/unit */
	assert_matches(g_out, "^" STAMP " rados-nkv\\[[0-9]+\\] warn unit: hello 42$");
	assert_matches(g_out, "^" STAMP " rados-nkv\\[[0-9]+\\] error tcp: explicit component$");
	nkv_log_flush();
}

static void level_filter(void **state)
{
	(void)state;
	nkv_log_set_level(NKV_LOG_ERROR);
	begin_capture();
	NKV_DEBUG("debug line");
	NKV_INFO("info line");
	NKV_WARN("warn line");
	NKV_ERR("error line");
	assert_int_equal(end_capture(), 1);
	assert_matches(g_out, " error unit: error line$");
	assert_false(nkv_log_enabled(NKV_LOG_WARN));
	assert_true(nkv_log_enabled(NKV_LOG_ERROR));
	nkv_log_set_level(NKV_LOG_INFO);
	nkv_log_flush();
}

static void repeats_collapse(void **state)
{
	(void)state;
	nkv_log_set_level(NKV_LOG_INFO);
	begin_capture();
	for (int i = 0; i < 200; i++)
		NKV_WARN("connection from 10.0.0.9 closed before ICReq");
	nkv_log_flush(); /* the daemon does this every second (window ended) and at exit */
	assert_int_equal(end_capture(), 2);
	assert_matches(g_out, "^" STAMP " rados-nkv\\[[0-9]+\\] warn unit: connection from 10.0.0.9 closed before ICReq$");
	assert_matches(g_out, " warn unit: connection from 10.0.0.9 closed before ICReq \\(repeated 199 times in the last "
			      "[0-9]+ s\\)$");
}

static void burst_capped(void **state)
{
	(void)state;
	nkv_log_set_level(NKV_LOG_INFO);
	begin_capture();
	for (int i = 0; i < 200; i++) /* a port scanner: the same event, a different source port each time */
		NKV_INFO("tcp 10.0.0.9:%d: qid 0 closed: peer closed", 40000 + i);
	NKV_INFO("another call site still prints");
	nkv_log_flush();
	assert_int_equal(end_capture(), NKV_LOG_BURST + 2);
	assert_matches(g_out, "10.0.0.9:40000: qid 0 closed: peer closed$");
	assert_matches(g_out, " info unit: another call site still prints$");
	assert_matches(g_out, "10.0.0.9:40199: qid 0 closed: peer closed \\(the last of 190 similar messages "
			      "suppressed in the last [0-9]+ s\\)$");
	/* a new window prints again */
	begin_capture();
	NKV_INFO("tcp 10.0.0.9:%d: qid 0 closed: peer closed", 50000);
	assert_int_equal(end_capture(), 1);
	nkv_log_flush();
}

static void debug_never_limited(void **state)
{
	(void)state;
	nkv_log_set_level(NKV_LOG_DEBUG);
	begin_capture();
	for (int i = 0; i < 50; i++)
		NKV_DEBUG("cmd opc 18h"); /* tools parse every debug line (test/interop) */
	nkv_log_flush();
	assert_int_equal(end_capture(), 50);
}

static void libnkv_prefix(void **state)
{
	(void)state;
	struct nkv_ctrl *c = NULL;

	nkv_log_set_level(NKV_LOG_DEBUG);
	begin_capture();
	/* a port that is not a number: libnkv refuses it before any lookup, with a debug line */
	int rc = nkv_connect("127.0.0.1", "no-such-service-nkv", "nqn.2026-11.io.rados-nkv:log", NULL, &c);
	int lines = end_capture();
	nkv_log_set_level(NKV_LOG_WARN);
	assert_true(rc < 0);
	assert_true(lines >= 1);
	assert_matches(g_out, "^" STAMP " libnkv\\[[0-9]+\\] debug client: ");
	assert_null(strstr(g_out, "rados-nkv["));
	nkv_log_flush();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(format),
		cmocka_unit_test(level_filter),
		cmocka_unit_test(repeats_collapse),
		cmocka_unit_test(burst_capped),
		cmocka_unit_test(debug_never_limited),
		cmocka_unit_test(libnkv_prefix),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
