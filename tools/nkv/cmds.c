/* SPDX-License-Identifier: Apache-2.0 */
/* cmds.c - the nkv CLI commands. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define LIST_HBS 65536u /* List host buffer per page */

static const char *trtype_str(uint8_t t)
{
	return t == NKV_TRTYPE_TCP ? "tcp" : t == 1 ? "rdma" : t == 0xfe ? "loop" : "unknown";
}

static const char *adrfam_str(uint8_t a)
{
	return a == NKV_ADRFAM_IPV4 ? "ipv4" : a == NKV_ADRFAM_IPV6 ? "ipv6" : "unknown";
}

static const char *subtype_str(uint8_t s)
{
	return s == NKV_SUBTYPE_NVME ? "nvme subsystem"
	       : s == NKV_SUBTYPE_CURRENT_DISCOVERY ? "current discovery subsystem"
	       : s == 1 ? "referral" : "unknown";
}

static const char *treq_str(uint8_t t)
{
	switch (t & 3) {
	case 1:
		return "required";
	case 2:
		return "not required";
	default:
		return "not specified";
	}
}

int cmd_discover(struct cli *c)
{
	struct nkv_disc_entry *e = NULL;
	unsigned n = 0;
	const char *port = c->trsvcid ? c->trsvcid : "8009";
	int rc = nkv_discover(c->traddr, port, &c->opts, &e, &n);
	if (rc) {
		cli_connect_error(c, port, NKV_DISCOVERY_NQN, rc);
		return EXIT_ERR;
	}
	if (c->json) {
		printf("{\"command\":\"discover\",\"records\":[");
		for (unsigned i = 0; i < n; i++) {
			printf("%s{\"trtype\":\"%s\",\"adrfam\":\"%s\",\"subtype\":\"%s\",\"treq\":%u,\"portid\":%u,"
			       "\"cntlid\":%u,\"asqsz\":%u,\"trsvcid\":",
			       i ? "," : "", trtype_str(e[i].trtype), adrfam_str(e[i].adrfam), subtype_str(e[i].subtype),
			       e[i].treq, e[i].portid, e[i].cntlid, e[i].asqsz);
			json_str(stdout, e[i].trsvcid, strlen(e[i].trsvcid));
			printf(",\"traddr\":");
			json_str(stdout, e[i].traddr, strlen(e[i].traddr));
			printf(",\"subnqn\":");
			json_str(stdout, e[i].subnqn, strlen(e[i].subnqn));
			printf("}");
		}
		printf("]}\n");
	} else {
		printf("Discovery Log Number of Records %u\n", n);
		for (unsigned i = 0; i < n; i++)
			printf("=====Discovery Log Entry %u======\n"
			       "trtype:  %s\nadrfam:  %s\nsubtype: %s\ntreq:    %s%s\nportid:  %u\n"
			       "trsvcid: %s\nsubnqn:  %s\ntraddr:  %s\n",
			       i, trtype_str(e[i].trtype), adrfam_str(e[i].adrfam), subtype_str(e[i].subtype),
			       treq_str(e[i].treq), (e[i].treq & NKV_TREQ_DISABLE_SQFC) ? ", sq flow control disable supported" : "",
			       e[i].portid, e[i].trsvcid, e[i].subnqn, e[i].traddr);
	}
	free(e);
	return EXIT_OK;
}

int cmd_list_ns(struct cli *c)
{
	int ex = cli_connect(c, false);
	if (ex)
		return ex;
	uint32_t ids[1024];
	int n = nkv_ns_list(c->ctrl, ids, 1024);
	if (n < 0)
		return cli_fail(c, "list-ns", n, NULL, NULL);
	if (c->json) {
		printf("{\"command\":\"list-ns\",\"subnqn\":");
		json_str(stdout, c->nqn, strlen(c->nqn));
		printf(",\"nsids\":[");
		for (int i = 0; i < n && i < 1024; i++)
			printf("%s%u", i ? "," : "", ids[i]);
		printf("]}\n");
	} else {
		for (int i = 0; i < n && i < 1024; i++)
			printf("[%4d]:%#x\n", i, ids[i]);
	}
	return EXIT_OK;
}

static void trimmed(char *dst, const char *src, size_t n)
{
	size_t l = strnlen(src, n);
	while (l && (src[l - 1] == ' ' || src[l - 1] == '\0'))
		l--;
	memcpy(dst, src, l);
	dst[l] = '\0';
}

static int identify_ns(struct cli *c)
{
	struct nkv_id_ns_kv *id = calloc(1, sizeof(*id));
	if (!id)
		return cli_fail(c, "identify", -ENOMEM, NULL, NULL);
	int rc = nkv_ns_identify(c->ctrl, c->nsid, id);
	if (rc) {
		char d[64];
		snprintf(d, sizeof(d), "namespace %u", c->nsid);
		free(id);
		if (rc == -ENOENT) { /* the errno's text would only repeat it less clearly */
			cli_json_error(c, "no such KV namespace", rc, 0);
			fprintf(stderr, "nkv: identify failed: no KV namespace %u (see nkv list-ns)\n", c->nsid);
			return EXIT_ERR;
		}
		return cli_fail(c, "identify", rc, NULL, d);
	}
	unsigned fi = id->kvfc & 0xf;
	const struct nkv_kv_format *f = &id->kvf[fi];
	char nguid[33];
	key_hex(nguid, id->nguid, 16);
	unsigned long long nsze = nkv_get64(&id->nsze), nuse = nkv_get64(&id->nuse);
	unsigned kvkml = nkv_get16(&f->kvkml), kvvml = nkv_get32(&f->kvvml), mnks = nkv_get32(&f->mnks);
	if (c->json) {
		printf("{\"command\":\"identify\",\"nsid\":%u,\"nsze\":%llu,\"nuse\":%llu,\"nkvf\":%u,\"kvfc\":%u,"
		       "\"nmic\":%u,\"nsattr\":%u,\"read_only\":%s,\"novg\":%u,\"nguid\":\"%s\",\"kvkml\":%u,"
		       "\"kvvml\":%u,\"mnks\":%u}\n",
		       c->nsid, nsze, nuse, id->nkvf, id->kvfc, id->nmic, id->nsattr, (id->nsattr & 1) ? "true" : "false",
		       nkv_get32(&id->novg), nguid, kvkml, kvvml, mnks);
	} else {
		char b1[32];
		printf("NVMe KV Namespace %u\n", c->nsid);
		printf("nsze    : %llu\nnuse    : %llu\nnkvf    : %u\nkvfc    : %u\nnmic    : %#x\n", nsze, nuse,
		       id->nkvf, id->kvfc, id->nmic);
		printf("nsattr  : %#x%s\nnovg    : %u\nnguid   : %s\n", id->nsattr, (id->nsattr & 1) ? " (read-only)" : "",
		       nkv_get32(&id->novg), nguid);
		printf("kvf%u    : kvkml %u, kvvml %u (%s), mnks %u\n", fi, kvkml, kvvml, size_str(kvvml, b1), mnks);
	}
	free(id);
	return EXIT_OK;
}

int cmd_identify(struct cli *c)
{
	int ex = cli_connect(c, false);
	if (ex)
		return ex;
	if (c->ns)
		return identify_ns(c);
	const struct nkv_id_ctrlr *id = nkv_ctrl_identify(c->ctrl);
	char sn[21], mn[41], fr[9], subnqn[257];
	trimmed(sn, id->sn, sizeof(id->sn));
	trimmed(mn, id->mn, sizeof(id->mn));
	trimmed(fr, id->fr, sizeof(id->fr));
	trimmed(subnqn, id->subnqn, sizeof(id->subnqn));
	uint32_t ver = nkv_get32(&id->ver);
	if (c->json) {
		printf("{\"command\":\"identify\",\"vid\":%u,\"sn\":", nkv_get16(&id->vid));
		json_str(stdout, sn, strlen(sn));
		printf(",\"mn\":");
		json_str(stdout, mn, strlen(mn));
		printf(",\"fr\":");
		json_str(stdout, fr, strlen(fr));
		printf(",\"cntlid\":%u,\"ver\":\"%u.%u.%u\",\"cntrltype\":%u,\"mdts\":%u,\"kas\":%u,\"maxcmd\":%u,"
		       "\"nn\":%u,\"sgls\":%u,\"ioccsz\":%u,\"iorcsz\":%u,\"icdoff\":%u,\"msdbd\":%u,\"subnqn\":",
		       nkv_get16(&id->cntlid), ver >> 16, (ver >> 8) & 0xff, ver & 0xff, id->cntrltype, id->mdts,
		       nkv_get16(&id->kas), nkv_get16(&id->maxcmd), nkv_get32(&id->nn), nkv_get32(&id->sgls),
		       nkv_get32(&id->ioccsz), nkv_get32(&id->iorcsz), nkv_get16(&id->icdoff), id->msdbd);
		json_str(stdout, subnqn, strlen(subnqn));
		printf("}\n");
	} else {
		printf("NVMe Identify Controller:\n");
		printf("vid       : %#x\nsn        : %s\nmn        : %s\nfr        : %s\n", nkv_get16(&id->vid), sn,
		       mn, fr);
		printf("cntlid    : %u\nver       : %u.%u.%u\ncntrltype : %u\nmdts      : %u\n", nkv_get16(&id->cntlid),
		       ver >> 16, (ver >> 8) & 0xff, ver & 0xff, id->cntrltype, id->mdts);
		printf("kas       : %u (x100 ms)\nmaxcmd    : %u\nnn        : %u\nsgls      : %#x\n",
		       nkv_get16(&id->kas), nkv_get16(&id->maxcmd), nkv_get32(&id->nn), nkv_get32(&id->sgls));
		printf("ioccsz    : %u (in-capsule data %u bytes)\niorcsz    : %u\nicdoff    : %u\nmsdbd     : %u\n",
		       nkv_get32(&id->ioccsz), nkv_get32(&id->ioccsz) >= 4 ? nkv_get32(&id->ioccsz) * 16 - 64 : 0,
		       nkv_get32(&id->iorcsz), nkv_get16(&id->icdoff), id->msdbd);
		printf("subnqn    : %s\n", subnqn);
	}
	return EXIT_OK;
}

/** KVVML of the namespace, or 0 if it cannot be read. */
static uint32_t ns_kvvml(struct cli *c)
{
	struct nkv_id_ns_kv *id = calloc(1, sizeof(*id));
	uint32_t v = 0;
	if (id && nkv_ns_identify(c->ctrl, c->nsid, id) == 0)
		v = nkv_get32(&id->kvf[id->kvfc & 0xf].kvvml);
	free(id);
	return v;
}

void json_key(const struct cli *c, const uint8_t *key, unsigned klen)
{
	char h[33];
	key_hex(h, key, klen);
	printf("\"key\":");
	if (c->hex)
		json_str(stdout, h, strlen(h));
	else
		json_str(stdout, key, klen);
	printf(",\"key_hex\":\"%s\"", h);
}

/*
 * Invalid Field (02h) on a Store TTL: the namespace has no cache, or (for a pin) the TTL is not finite.
 * The host cannot tell which from the status alone, so the message names what the request makes
 * possible and no more.
 */
static void ttl_invalid_detail(const struct cli *c, char *detail, size_t n)
{
	if (!c->pin)
		snprintf(detail, n, "namespace %u has no cache: --ttl needs a cache namespace", c->nsid);
	else if (c->ttl_s == NKV_TTL_NONE)
		snprintf(detail, n, "a pin needs a finite TTL, not --ttl none (or namespace %u has no cache)", c->nsid);
	else if (c->ttl_s == NKV_TTL_DEFAULT)
		snprintf(detail, n, "namespace %u has no cache, or no default TTL for a pin: give --ttl SECONDS", c->nsid);
	else
		snprintf(detail, n, "namespace %u has no cache: --pin needs a cache namespace", c->nsid);
}

int cmd_store(struct cli *c)
{
	uint8_t key[16];
	unsigned klen;
	if (key_parse(c, c->args[0], key, &klen))
		return EXIT_USAGE;
	const char *path = c->nargs > 1 ? c->args[1] : "-";
	uint8_t *val = NULL;
	size_t len = 0;
	int rc = read_input(path, &val, &len, 0xffffffffu);
	if (rc) {
		char reason[96];
		snprintf(reason, sizeof(reason), "cannot read the value: %s", strerror(-rc));
		cli_json_error(c, reason, rc, 0);
		fprintf(stderr, "nkv: cannot read %s: %s\n", strcmp(path, "-") ? path : "stdin",
			rc == -EFBIG ? "larger than 4 GiB, the protocol's limit" : strerror(-rc));
		return EXIT_ERR;
	}
	int ex = cli_connect(c, true);
	if (ex) {
		free(val);
		return ex;
	}
	struct nkv_cpl cpl = {0};
	bool ttl = c->ttl_set || c->pin || c->hash_set; /* Store TTL (F1h) */
	if (c->hash_set) { /* no call of nkv.h takes a hash: build the command as the engine does */
		struct nkv_sqe sqe;
		nkv_sqe_store_ttl(&sqe, c->nsid, key, klen, (uint32_t)len, c->store_opts, c->ttl_s,
				  c->pin ? NKV_TTL_PIN : 0);
		nkv_sqe_set_block_hash(&sqe, c->block_hash);
		rc = nkv_exec(c->qp, &sqe, val, (uint32_t)len, &cpl);
	} else if (ttl)
		rc = nkv_store_ttl(c->qp, c->nsid, key, klen, val, (uint32_t)len, c->store_opts, c->ttl_s, c->pin, &cpl);
	else
		rc = nkv_store(c->qp, c->nsid, key, klen, val, (uint32_t)len, c->store_opts, &cpl);
	free(val);
	if (rc) {
		char detail[160] = "", b1[32], b2[32];
		uint32_t lim;
		if (ttl && rc == -EINVAL && cpl.status == (NKV_SCT_GENERIC << 8 | NKV_SC_INVALID_FIELD))
			ttl_invalid_detail(c, detail, sizeof(detail));
		else if (ttl && rc == -ENOSPC && c->pin)
			snprintf(detail, sizeof(detail), "pin quota exceeded: namespace %u pins no more bytes until pins "
				 "expire or are deleted", c->nsid);
		else if (ttl && rc == -EOPNOTSUPP)
			snprintf(detail, sizeof(detail), "the target has no Store TTL (F1h): --ttl and --pin need a "
				 "rados-nkv with caches");
		else if (rc == -EFBIG && (lim = ns_kvvml(c)) != 0)
			snprintf(detail, sizeof(detail), "value %s > namespace limit %s", size_str(len, b1),
				 size_str(lim, b2));
		else if (rc == -ENOENT)
			snprintf(detail, sizeof(detail), "--must-exist and the key is absent");
		else if (rc == -EEXIST)
			snprintf(detail, sizeof(detail), "--must-not-exist and the key is present");
		else if (rc == -EROFS)
			snprintf(detail, sizeof(detail), "namespace %u is read-only", c->nsid);
		return cli_fail(c, "store", rc, &cpl, detail);
	}
	/* The TTL the target applied (DW0 of Store TTL): the namespace's default or its max_ttl may
	 * differ from what was asked. 0: a target that does not say; then only the request is known. */
	uint32_t got = ttl ? cpl.dw0 : 0;
	bool cut = got && c->ttl_s != NKV_TTL_DEFAULT && got != c->ttl_s;
	if (c->json) {
		printf("{\"command\":\"store\",");
		json_key(c, key, klen);
		printf(",\"bytes\":%zu", len);
		if (ttl) {
			/* ttl: the TTL applied in seconds, null for never (unknown from an older target: the
			 * one asked, 0 for the namespace's default); ttl_requested: what was asked */
			uint32_t shown = got ? got : c->ttl_s;
			if (shown == NKV_TTL_NONE)
				printf(",\"ttl\":null");
			else
				printf(",\"ttl\":%u", shown);
			if (c->ttl_s == NKV_TTL_NONE)
				printf(",\"ttl_requested\":null");
			else
				printf(",\"ttl_requested\":%u", c->ttl_s);
			printf(",\"ttl_cut\":%s,\"pinned\":%s", cut ? "true" : "false", c->pin ? "true" : "false");
		}
		printf("}\n");
	} else {
		char b[32];
		printf("stored ");
		key_print(stdout, c, key, klen);
		printf(" (%s", size_str(len, b));
		if (ttl) {
			uint32_t shown = got ? got : c->ttl_s;
			if (shown == NKV_TTL_NONE)
				printf(", no expiry");
			else if (shown == NKV_TTL_DEFAULT)
				printf(", the namespace's default TTL");
			else
				printf(", TTL %u s", shown);
			if (cut && c->ttl_s == NKV_TTL_NONE)
				printf(" (not none: cut by the namespace's max_ttl)");
			else if (cut)
				printf(" (not %u s: cut by the namespace's max_ttl)", c->ttl_s);
			else if (got && c->ttl_s == NKV_TTL_DEFAULT)
				printf(" (the namespace's default)");
			if (c->pin)
				printf(", pinned");
		}
		printf(")\n");
	}
	return EXIT_OK;
}

int cmd_retrieve(struct cli *c)
{
	uint8_t key[16];
	unsigned klen;
	if (key_parse(c, c->args[0], key, &klen))
		return EXIT_USAGE;
	const char *path = c->nargs > 1 ? c->args[1] : "-";
	int ex = cli_connect(c, true);
	if (ex)
		return ex;
	uint64_t hbs = c->max_size;
	bool explicit_size = hbs != 0;
	if (!hbs) {
		hbs = ns_kvvml(c);
		if (!hbs)
			hbs = 1u << 20; /* unknown limit: start at 1 MiB and grow to the value size */
	}
	uint8_t *buf = NULL;
	struct nkv_cpl cpl = {0};
	uint32_t vsize = 0;
	uint64_t off = c->offset;
	bool range = c->offset_set; /* Retrieve Range (F2h): the value from byte off on */
	int rc;
	for (int attempt = 0;; attempt++) {
		free(buf);
		buf = malloc(hbs ? hbs : 1);
		if (!buf)
			return cli_fail(c, "retrieve", -ENOMEM, NULL, NULL);
		if (range)
			rc = nkv_retrieve_range(c->qp, c->nsid, key, klen, off, buf, (uint32_t)hbs, NULL, &vsize, &cpl);
		else
			rc = nkv_retrieve(c->qp, c->nsid, key, klen, buf, (uint32_t)hbs, &vsize, &cpl);
		/* The value (from the offset) outgrew the default buffer: retry once with its exact size. */
		uint64_t rest = range ? (vsize > off ? vsize - off : 0) : vsize;
		if (rc == 0 && rest > hbs && !explicit_size && attempt == 0) {
			hbs = rest;
			continue;
		}
		break;
	}
	if (rc) {
		free(buf);
		char d[64] = "";
		if (rc == -ENOENT)
			snprintf(d, sizeof(d), "namespace %u", c->nsid);
		return cli_fail(c, "retrieve", rc, &cpl, d);
	}
	/* what the value holds from the offset on (all of it without --offset), and what came back */
	uint32_t rest = range ? nkv_range_xfer(vsize, off, UINT32_MAX) : vsize;
	uint32_t got = cpl.xfer < rest ? cpl.xfer : rest;
	bool truncated = rest > got;
	bool to_stdout = strcmp(path, "-") == 0;
	if (truncated && !range) {
		char b1[32], b2[32];
		fprintf(stderr, "nkv: warning: value is %s, only the first %s returned (use --max-size %u)\n",
			size_str(vsize, b1), size_str(got, b2), vsize);
	} else if (truncated) {
		char b1[32], b2[32];
		fprintf(stderr, "nkv: warning: value is %s, only %s from offset %llu returned (use --max-size %u)\n",
			size_str(vsize, b1), size_str(got, b2), (unsigned long long)off, rest);
	} else if (range && off >= vsize) {
		char b1[32];
		fprintf(stderr, "nkv: warning: offset %llu is at or past the end of the value (%s): nothing returned\n",
			(unsigned long long)off, size_str(vsize, b1));
	}
	if (c->json) {
		if (!to_stdout && (rc = write_output(path, buf, got)) < 0) {
			char reason[96];
			snprintf(reason, sizeof(reason), "cannot write the value: %s", strerror(-rc));
			cli_json_error(c, reason, rc, 0);
			fprintf(stderr, "nkv: cannot write %s: %s\n", path, strerror(-rc));
			free(buf);
			return EXIT_ERR;
		}
		printf("{\"command\":\"retrieve\",");
		json_key(c, key, klen);
		if (range)
			printf(",\"offset\":%llu", (unsigned long long)off);
		printf(",\"value_size\":%u,\"bytes\":%u,\"truncated\":%s", vsize, got, truncated ? "true" : "false");
		if (to_stdout) {
			printf(",\"value\":");
			json_str(stdout, buf, got);
		} else {
			printf(",\"file\":");
			json_str(stdout, path, strlen(path));
		}
		printf("}\n");
	} else {
		fflush(stdout);
		rc = write_output(path, buf, got);
		if (rc) {
			fprintf(stderr, "nkv: cannot write %s: %s\n", to_stdout ? "stdout" : path, strerror(-rc));
			free(buf);
			return EXIT_ERR;
		}
	}
	free(buf);
	return EXIT_OK;
}

/* Parse the KEY argument and connect: the prologue of the single-key commands. @return exit code. */
static int key_and_connect(struct cli *c, uint8_t key[16], unsigned *klen)
{
	if (key_parse(c, c->args[0], key, klen))
		return EXIT_USAGE;
	return cli_connect(c, true);
}

/* Report a single-key command that succeeded: "<verb> KEY", or JSON {"command":..,"key":..}. */
static void key_report(struct cli *c, const char *cmd, const char *verb, const uint8_t *key, unsigned klen)
{
	if (c->json) {
		printf("{\"command\":\"%s\",", cmd);
		json_key(c, key, klen);
		printf("}\n");
	} else {
		printf("%s ", verb);
		key_print(stdout, c, key, klen);
		printf("\n");
	}
}

int cmd_delete(struct cli *c)
{
	uint8_t key[16];
	unsigned klen;
	int ex = key_and_connect(c, key, &klen);
	if (ex)
		return ex;
	struct nkv_cpl cpl = {0};
	int rc = nkv_delete(c->qp, c->nsid, key, klen, &cpl);
	if (rc)
		return cli_fail(c, "delete", rc, &cpl, NULL);
	key_report(c, "delete", "deleted", key, klen);
	return EXIT_OK;
}

int cmd_exist(struct cli *c)
{
	uint8_t key[16];
	unsigned klen;
	int ex = key_and_connect(c, key, &klen);
	if (ex)
		return ex;
	struct nkv_cpl cpl = {0};
	int rc = nkv_exist(c->qp, c->nsid, key, klen, &cpl);
	bool absent = rc == -ENOENT && (cpl.status & 0xff) == NKV_SC_KV_KEY_NOT_EXIST;
	if (rc && !absent)
		return cli_fail(c, "exist", rc, &cpl, NULL);
	if (c->json) {
		printf("{\"command\":\"exist\",");
		json_key(c, key, klen);
		printf(",\"exists\":%s}\n", absent ? "false" : "true");
	} else {
		key_print(stdout, c, key, klen);
		printf(absent ? ": does not exist\n" : ": exists\n");
	}
	return absent ? EXIT_NOKEY : EXIT_OK;
}

static bool key_eq(const uint8_t *a, unsigned al, const uint8_t *b, unsigned bl)
{
	return al == bl && memcmp(a, b, al) == 0;
}

int cmd_list(struct cli *c)
{
	uint8_t start[16] = {0};
	unsigned slen = 0;
	if (c->nargs > 0 && key_parse(c, c->args[0], start, &slen))
		return EXIT_USAGE;
	int ex = cli_connect(c, true);
	if (ex)
		return ex;
	uint8_t *buf = malloc(LIST_HBS);
	if (!buf)
		return cli_fail(c, "list", -ENOMEM, NULL, NULL);
	uint64_t count = 0;
	bool cut = false;        /* --max stopped it with keys left */
	bool skip_start = false; /* later pages start at the last key printed, which List includes again */
	if (c->json)
		printf("{\"command\":\"list\",\"keys\":[");
	for (;;) {
		struct nkv_cpl cpl = {0};
		int rc = nkv_list(c->qp, c->nsid, start, slen, buf, LIST_HBS, &cpl);
		if (rc) {
			free(buf);
			return cli_fail(c, "list", rc, &cpl, NULL); /* replaces the keys printed so far */
		}
		uint64_t pos = 0;
		uint8_t k[16];
		unsigned kl;
		unsigned fresh = 0;
		bool done = false;
		while ((rc = nkv_list_next(buf, cpl.xfer, &pos, k, &kl)) == 1) {
			if (skip_start && key_eq(k, kl, start, slen))
				continue;
			if (c->max_keys && count >= c->max_keys) { /* one key past --max: the list was cut */
				cut = done = true;
				break;
			}
			if (c->json) {
				char h[33];
				key_hex(h, k, kl);
				printf("%s", count ? "," : "");
				if (c->hex)
					printf("\"%s\"", h);
				else
					json_str(stdout, k, kl);
			} else {
				key_print(stdout, c, k, kl);
				putchar('\n');
			}
			memcpy(start, k, kl);
			slen = kl;
			fresh++;
			count++;
		}
		if (rc < 0) {
			free(buf);
			cli_json_error(c, "malformed List data from the target", -EPROTO, 0);
			fprintf(stderr, "nkv: list failed: malformed List data from the target\n");
			return EXIT_ERR;
		}
		/*
		 * Done when a page brought nothing new, or when the target left room for another maximal
		 * entry (it packs as many whole entries as fit, so nothing more exists).
		 */
		if (done || fresh == 0 || cpl.xfer + nkv_list_entry_size(NKV_KEY_MAX) <= LIST_HBS)
			break;
		skip_start = true;
	}
	if (c->json) {
		printf("],\"count\":%llu,\"more\":%s}\n", (unsigned long long)count, cut ? "true" : "false");
	} else if (cut) {
		fprintf(stderr, "nkv: list: --max %llu reached; more keys follow (the next list starts at the "
				"last key printed)\n", (unsigned long long)c->max_keys);
	}
	free(buf);
	return EXIT_OK;
}
