/* SPDX-License-Identifier: Apache-2.0 */
/*
 * exec.c - `nkv exec KEY OPCODE`: a rados-nkv vendor Exec (an allowlisted RADOS class method run on
 * the key's object; nkv_spec.h "vendor Exec", libnkv nkv_vendor_exec()). The opcode's bits 1:0 say
 * what moves, so they also say which options make sense: --in FILE for 01b (input to the target),
 * --arg HEX (up to 8 inline bytes) for 00b and 10b, --out/--size for 10b (output to the host).
 * Every mismatch is bad usage (exit 64), caught before connecting.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define EXEC_DEFAULT_SIZE (1u << 20) /* 10b host buffer without --size */

static const char *const g_dir_name[] = {"none", "host-to-controller", "controller-to-host", "bidirectional"};

static int hexdigit(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/* --arg: 1 to 8 bytes as 2 to 16 hex digits (optional 0x). @return 0 or EXIT_USAGE (reported). */
static int arg_parse(const struct cli *c, const char *s, uint8_t out[8], unsigned *n)
{
	const char *h = s;
	if (h[0] == '0' && (h[1] == 'x' || h[1] == 'X'))
		h += 2;
	size_t len = strlen(h);
	if (len == 0 || (len & 1))
		return cli_usage(c, "exec: --arg '%s' must be hex bytes, an even number of hex digits", s);
	if (len > 2 * NKV_EXEC_INLINE_MAX)
		return cli_usage(c, "exec: --arg '%s' is %zu bytes; an Exec carries at most %u inline bytes (use an "
				    "opcode with bits 1:0 = 01b and --in FILE for more input)",
				 s, len / 2, NKV_EXEC_INLINE_MAX);
	for (size_t i = 0; i < len / 2; i++) {
		int hi = hexdigit(h[2 * i]), lo = hexdigit(h[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return cli_usage(c, "exec: --arg '%s' is not hex", s);
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	*n = (unsigned)(len / 2);
	return 0;
}

/* OPCODE: 0x80 to 0xef, hex with 0x or decimal; not direction 11b. @return 0 or EXIT_USAGE. */
static int opcode_parse(const struct cli *c, const char *s, uint8_t *opc)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 0);
	if (errno || end == s || *end || *s == '-' || v < NKV_EXEC_OPC_FIRST || v > 0xff)
		return cli_usage(c, "exec: bad opcode '%s' (a vendor Exec opcode: 0x80 to 0xef, hex with 0x or decimal)", s);
	if (v >= NKV_VS_OPC_FIRST)
		return cli_usage(c, "exec: opcode %#lx is a built-in vendor command (0xf0-0xff), not an Exec; Retrieve Range "
				 "(0xf2) is 'nkv retrieve --offset'", v);
	if (nkv_opc_xfer((uint8_t)v) == NKV_XFER_BIDI)
		return cli_usage(c, "exec: opcode %#lx has data direction 11b (bidirectional), which no Exec uses", v);
	*opc = (uint8_t)v;
	return 0;
}

/* Does the output read as text (printable ASCII, tabs, newlines)? Then JSON carries it as a string too. */
static bool is_text(const uint8_t *b, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if ((b[i] < 0x20 && b[i] != '\t' && b[i] != '\n' && b[i] != '\r') || b[i] >= 0x7f)
			return false;
	return true;
}

/* A failed Exec, with the vendor statuses spelled out for people; @return the exit status. */
static int exec_fail(struct cli *c, uint8_t opc, int rc, const struct nkv_cpl *cpl)
{
	unsigned code = cpl->status & 0x7ff;
	char reason[160], d[128];
	if (code == NKV_SC_EXEC_UNAVAILABLE || code == NKV_SC_EXEC_FAILED) {
		if (code == NKV_SC_EXEC_UNAVAILABLE)
			snprintf(reason, sizeof(reason), "class or method not available on the OSD");
		else
			snprintf(reason, sizeof(reason), "method failed: %s", strerror(-rc));
		cli_json_error(c, reason, rc, cpl->status);
		fprintf(stderr, "nkv: exec %#x failed: %s\n", opc, reason);
		return EXIT_ERR;
	}
	if (code == NKV_SC_INVALID_OPCODE) {
		snprintf(d, sizeof(d), "opcode %#x is not allowlisted for namespace %u, or the target has no vendor Exec",
			 opc, c->nsid);
		return cli_fail(c, "exec", rc, cpl, d);
	}
	return cli_fail(c, "exec", rc, cpl, NULL);
}

int cmd_exec(struct cli *c)
{
	uint8_t key[16], opc = 0, inl[8];
	unsigned klen, inl_len = 0;
	if (key_parse(c, c->args[0], key, &klen))
		return EXIT_USAGE;
	int ex = opcode_parse(c, c->args[1], &opc);
	if (ex)
		return ex;
	unsigned dir = nkv_opc_xfer(opc);
	if (c->exec_in && c->exec_arg)
		return cli_usage(c, "exec: --in and --arg exclude each other (opcode bits 1:0 = 01b take --in, 00b and "
				    "10b take --arg)");
	if (c->exec_in && dir != NKV_XFER_H2C)
		return cli_usage(c, "exec: opcode %#x (bits 1:0 = %u%ub) takes no input buffer; --in is for opcodes with "
				    "bits 1:0 = 01b, --arg HEX gives up to 8 inline bytes", opc, dir >> 1, dir & 1);
	if (c->exec_arg && dir == NKV_XFER_H2C)
		return cli_usage(c, "exec: opcode %#x (bits 1:0 = 01b) takes its input as --in FILE, not inline --arg", opc);
	if ((c->exec_out || c->exec_size_set) && dir != NKV_XFER_C2H)
		return cli_usage(c, "exec: opcode %#x returns no output data (bits 1:0 = %u%ub); --out and --size are for "
				    "opcodes with bits 1:0 = 10b", opc, dir >> 1, dir & 1);
	if (c->exec_arg && (ex = arg_parse(c, c->exec_arg, inl, &inl_len)))
		return ex;

	uint8_t *in = NULL, *out = NULL;
	size_t in_len = 0;
	uint32_t out_len = 0;
	if (c->exec_in) {
		int rc = read_input(c->exec_in, &in, &in_len, 0xffffffffu);
		if (rc) {
			char reason[96];
			snprintf(reason, sizeof(reason), "cannot read the input: %s", strerror(-rc));
			cli_json_error(c, reason, rc, 0);
			fprintf(stderr, "nkv: cannot read %s: %s\n", strcmp(c->exec_in, "-") ? c->exec_in : "stdin",
				rc == -EFBIG ? "larger than 4 GiB, the protocol's limit" : strerror(-rc));
			return EXIT_ERR;
		}
	}
	if (dir == NKV_XFER_C2H) {
		out_len = c->exec_size_set ? (uint32_t)c->exec_size : EXEC_DEFAULT_SIZE;
		if (!(out = malloc(out_len ? out_len : 1))) {
			free(in);
			return cli_fail(c, "exec", -ENOMEM, NULL, NULL);
		}
	}
	ex = cli_connect(c, true);
	if (ex) {
		free(in);
		free(out);
		return ex;
	}
	struct nkv_cpl cpl = {0};
	uint32_t osize = 0;
	int rc = nkv_vendor_exec(c->qp, c->nsid, key, klen, opc, dir == NKV_XFER_H2C ? (const void *)in : inl,
				 dir == NKV_XFER_H2C ? (uint32_t)in_len : inl_len, out, out_len, &osize, &cpl);
	free(in);
	if (rc) {
		free(out);
		return exec_fail(c, opc, rc, &cpl);
	}

	uint32_t got = dir == NKV_XFER_C2H ? (cpl.xfer < osize ? cpl.xfer : osize) : 0;
	bool truncated = dir == NKV_XFER_C2H && osize > got;
	const char *path = c->exec_out ? c->exec_out : "-";
	bool to_stdout = strcmp(path, "-") == 0;
	if (truncated && out_len) {
		/* Not re-run with a bigger buffer, unlike retrieve: a method may change the object. */
		char b1[32], b2[32];
		fprintf(stderr, "nkv: warning: the output is %s, only the first %s returned (use --size %u; the method "
				"was run once)\n", size_str(osize, b1), size_str(got, b2), osize);
	}
	if (dir == NKV_XFER_C2H && !(c->json && to_stdout)) {
		fflush(stdout);
		if ((rc = write_output(path, out, got)) < 0) {
			char reason[96];
			snprintf(reason, sizeof(reason), "cannot write the output: %s", strerror(-rc));
			cli_json_error(c, reason, rc, 0);
			fprintf(stderr, "nkv: cannot write %s: %s\n", to_stdout ? "stdout" : path, strerror(-rc));
			free(out);
			return EXIT_ERR;
		}
	}
	if (c->json) {
		printf("{\"command\":\"exec\",");
		json_key(c, key, klen);
		printf(",\"opcode\":%u,\"direction\":\"%s\",\"input_bytes\":%zu,\"output_size\":%u", opc, g_dir_name[dir],
		       dir == NKV_XFER_H2C ? in_len : inl_len, osize);
		if (dir == NKV_XFER_C2H) {
			printf(",\"bytes\":%u,\"truncated\":%s", got, truncated ? "true" : "false");
			if (to_stdout) {
				printf(",\"output_hex\":\"");
				for (uint32_t i = 0; i < got; i++)
					printf("%02x", out[i]);
				printf("\"");
				if (is_text(out, got)) {
					printf(",\"output_text\":");
					json_str(stdout, out, got);
				}
			} else {
				printf(",\"file\":");
				json_str(stdout, path, strlen(path));
			}
		}
		printf("}\n");
	} else if (dir != NKV_XFER_C2H || !to_stdout) {
		/* stdout carries the output bytes alone when they go there; otherwise say what happened */
		char b[32];
		printf("exec %#x on ", opc);
		key_print(stdout, c, key, klen);
		printf(": output %s%s\n", size_str(osize, b),
		       dir == NKV_XFER_C2H ? "" : " (not returned: the opcode moves no data to the host)");
	}
	free(out);
	return EXIT_OK;
}
