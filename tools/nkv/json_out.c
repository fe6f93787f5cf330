/* SPDX-License-Identifier: Apache-2.0 */
/*
 * json_out.c - the `-o json` contract: exactly one JSON object on stdout per nkv run, success or
 * failure, usage errors included. Commands print their object as before; stdout is held in memory
 * until the run ends, so a path that printed nothing still leaves one error object, and a failure
 * after a partial print never leaves a torn document.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "common/cli_json.h"

static FILE *g_stdout; /* the real stdout while a run is held in memory */
static FILE *g_mem;
static char *g_buf;
static size_t g_len;


void cli_json_begin(struct cli *c, int argc, char **argv)
{
	c->json = nkv_cli_wants_json(argc, argv);
	if (!c->json)
		return;
	fflush(stdout);
	if (!(g_mem = open_memstream(&g_buf, &g_len)))
		return; /* no memory: objects go straight out, as without the guard */
	g_stdout = stdout;
	stdout = g_mem;
}

int cli_json_end(struct cli *c, int ex)
{
	if (!g_mem)
		return ex;
	fclose(g_mem);
	g_mem = NULL;
	stdout = g_stdout;
	if (g_len == 0 && ex != EXIT_OK) {
		/* A failure reported on stderr only (e.g. a workload bench refused before running). */
		char reason[96];
		snprintf(reason, sizeof(reason), "failed with exit status %d (the reason is on stderr)", ex);
		cli_json_error(c, reason, ex == EXIT_USAGE ? 0 : -EIO, ex == EXIT_USAGE ? CLI_STATUS_USAGE : 0);
	} else {
		fwrite(g_buf, 1, g_len, stdout);
	}
	free(g_buf);
	g_buf = NULL;
	fflush(stdout);
	return ex;
}

void cli_json_discard(void)
{
	if (g_mem) {
		fflush(g_mem);
		rewind(g_mem);
		fflush(g_mem); /* the stream's size is now 0: the next object replaces what was printed */
	}
}

/* What "status" says: the NVMe status name, "usage", or the errno's name. */
static const char *status_field(int rc, unsigned status, char buf[96])
{
	if (status == CLI_STATUS_USAGE)
		return "usage";
	if (status && status != NKV_STATUS_HOST_PATH)
		return status_name((uint16_t)status, buf);
	if (rc < 0) {
		const char *n = strerrorname_np(-rc);
		if (n)
			return n;
	}
	return status == NKV_STATUS_HOST_PATH ? "Host Pathing Error" : "error";
}

void cli_json_error(const struct cli *c, const char *reason, int rc, unsigned status)
{
	char nb[96];
	if (!c->json)
		return;
	cli_json_discard(); /* a partial object (list pages) never precedes the error */
	printf("{\"command\":");
	if (c->cmd)
		json_str(stdout, c->cmd, strlen(c->cmd));
	else
		printf("null");
	printf(",\"error\":");
	json_str(stdout, reason, strlen(reason));
	printf(",\"status\":");
	const char *s = status_field(rc, status, nb);
	json_str(stdout, s, strlen(s));
	printf(",\"errno\":%d", rc < 0 ? -rc : 0);
	if (status && status != CLI_STATUS_USAGE)
		printf(",\"nvme_status\":%u", status);
	printf("}\n");
}

int cli_usage(const struct cli *c, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "nkv: %s\n(nkv --help for usage)\n", msg);
	cli_json_error(c, msg, -EINVAL, CLI_STATUS_USAGE);
	return EXIT_USAGE;
}

void cli_help(const struct cli *c, const char *text)
{
	if (!c->json) {
		fputs(text, stdout);
		return;
	}
	printf("{\"command\":\"help\",\"usage\":");
	json_str(stdout, text, strlen(text));
	printf("}\n");
}
