/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nixl_unit.c - the RADOS_NKV NIXL table without a target: parameters (defaults, S3's keys
 * ignored, environment fallback, empty values, bad values named), the errno and NVMe status to
 * NIXL status mapping, and calls with bad handles.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "nkv/nkv.h"
#include "nkv_nixl.h"

unsigned h_pass, h_fail;

#define N(a) (sizeof(a) / sizeof((a)[0]))

static void t_defaults(void)
{
	struct nkv_nixl_opts o;
	/* S3's parameters, as a plugin installed under the name OBJ receives them */
	struct nkv_nixl_param s3[] = {{"bucket", "kv"}, {"endpoint_override", "http://10.0.0.1:9000"},
				      {"access_key", "AKIA"}, {"secret_key", "s"}, {"scheme", "http"},
				      {"region", "us-east-1"}, {"crtMinLimit", "1048576"}};
	char err[128] = "";
	CHECK(nkv_nixl_parse_params(s3, N(s3), &o, err, sizeof(err)) == NKV_NIXL_SUCCESS, "S3 keys: %s", err);
	CHECK(strcmp(o.traddr, "127.0.0.1") == 0 && strcmp(o.port, "4420") == 0, "default address %s:%s", o.traddr,
	      o.port);
	CHECK(strcmp(o.subnqn, "nqn.2026-11.io.rados-nkv:nkv") == 0, "default subnqn %s", o.subnqn);
	CHECK(o.shm[0] == 0 && o.hostnqn[0] == 0, "no shm, no host NQN by default");
	CHECK(o.nsid == 1 && o.queues == 4 && o.depth == 0 && o.timeout_ms == 30000 && o.max_ops == 65536 &&
		      o.staging_mb == 256,
	      "numbers %u %u %u %u %u %u", o.nsid, o.queues, o.depth, o.timeout_ms, o.max_ops, o.staging_mb);
	CHECK(o.reconnect_max_ms == 1000 && o.reconnect_wait_ms == 30000, "reconnect %u %u", o.reconnect_max_ms,
	      o.reconnect_wait_ms);
	CHECK(nkv_nixl_parse_params(NULL, 0, &o, NULL, 0) == NKV_NIXL_SUCCESS, "no parameters at all");
}

static void t_values(void)
{
	struct nkv_nixl_opts o;
	char err[160] = "";
	struct nkv_nixl_param p[] = {{"traddr", "10.1.2.3"}, {"trsvcid", "4421"}, {"subnqn", "nqn.x:y"},
				     {"shm", "/run/rados-nkv/kv/shm.sock"}, {"nsid", "7"}, {"queues", "16"},
				     {"queue_depth", "512"}, {"timeout_ms", "0x100"}, {"max_ops", "1000"},
				     {"hostnqn", "nqn.2014-08.org.nvmexpress:uuid:1"}, {"nsid", "8"},
				     {"staging_mb", "0"}};
	CHECK(nkv_nixl_parse_params(p, N(p), &o, err, sizeof(err)) == 0, "%s", err);
	CHECK(strcmp(o.traddr, "10.1.2.3") == 0 && strcmp(o.port, "4421") == 0, "trsvcid is port");
	CHECK(strcmp(o.shm, "/run/rados-nkv/kv/shm.sock") == 0 && strcmp(o.subnqn, "nqn.x:y") == 0, "strings");
	CHECK(o.nsid == 8, "the last of a repeated key wins (%u)", o.nsid);
	CHECK(o.queues == 16 && o.depth == 512 && o.timeout_ms == 256 && o.max_ops == 1000 && o.staging_mb == 0,
	      "numbers");
	CHECK(strcmp(o.hostnqn, "nqn.2014-08.org.nvmexpress:uuid:1") == 0, "hostnqn");
	CHECK(o.reconnect_wait_ms == 256, "reconnect_wait_ms follows timeout_ms (%u)", o.reconnect_wait_ms);
	struct nkv_nixl_param rc[] = {{"reconnect_max_ms", "250"}, {"reconnect_wait_ms", "0"}};
	CHECK(nkv_nixl_parse_params(rc, N(rc), &o, err, sizeof(err)) == 0 && o.reconnect_max_ms == 250 &&
		      o.reconnect_wait_ms == 0,
	      "reconnect keys: %s %u %u", err, o.reconnect_max_ms, o.reconnect_wait_ms);

	struct {
		const char *k, *v;
	} bad[] = {{"nsid", "0"},         {"nsid", "-1"},       {"nsid", "4294967295"}, {"nsid", "1x"},
		   {"nsid", " 1"},        {"queues", "0"},      {"queues", "65"},       {"queue_depth", "1"},
		   {"queue_depth", "65536"}, {"timeout_ms", "0"}, {"max_ops", "16777217"}, {"port", "123456789"},
		   {"nsid", "99999999999999999999999"}, {"staging_mb", "65537"}, {"reconnect_max_ms", "9"},
		   {"reconnect_max_ms", "60001"}, {"reconnect_wait_ms", "-1"}, {"reconnect_wait_ms", "3600001"}};
	for (size_t i = 0; i < N(bad); i++) {
		struct nkv_nixl_param one = {bad[i].k, bad[i].v};
		err[0] = 0;
		int st = nkv_nixl_parse_params(&one, 1, &o, err, sizeof(err));
		CHECK(st == NKV_NIXL_ERR_INVALID_PARAM && strstr(err, bad[i].k), "%s=%s: %d '%s'", bad[i].k, bad[i].v, st,
		      err);
	}
	char longv[300];
	memset(longv, 'a', sizeof(longv) - 1);
	longv[sizeof(longv) - 1] = 0;
	struct nkv_nixl_param lp = {"traddr", longv};
	CHECK(nkv_nixl_parse_params(&lp, 1, &o, err, sizeof(err)) == NKV_NIXL_ERR_INVALID_PARAM &&
		      strstr(err, "longer than 255"),
	      "long traddr: %s", err);
	CHECK(nkv_nixl_parse_params(&lp, 1, NULL, NULL, 0) == NKV_NIXL_ERR_INVALID_PARAM, "NULL opts");
}

static void t_env(void)
{
	struct nkv_nixl_opts o;
	char err[160] = "";
	setenv("NKV_NIXL_TRADDR", "192.0.2.9", 1);
	setenv("NKV_NIXL_NSID", "5", 1);
	setenv("NKV_NIXL_SHM", "", 1); /* empty: not given */
	struct nkv_nixl_param p[] = {{"bucket", "b"}};
	CHECK(nkv_nixl_parse_params(p, 1, &o, err, sizeof(err)) == 0, "%s", err);
	CHECK(strcmp(o.traddr, "192.0.2.9") == 0 && o.nsid == 5 && o.shm[0] == 0, "environment fallback");
	/* a parameter beats the environment; an empty parameter does not count */
	struct nkv_nixl_param q[] = {{"traddr", "198.51.100.1"}, {"nsid", ""}};
	CHECK(nkv_nixl_parse_params(q, 2, &o, err, sizeof(err)) == 0, "%s", err);
	CHECK(strcmp(o.traddr, "198.51.100.1") == 0 && o.nsid == 5, "parameter first, empty skipped (%u)", o.nsid);
	setenv("NKV_NIXL_QUEUES", "lots", 1);
	CHECK(nkv_nixl_parse_params(NULL, 0, &o, err, sizeof(err)) == NKV_NIXL_ERR_INVALID_PARAM &&
		      strstr(err, "NKV_NIXL_QUEUES"),
	      "a bad environment value names the variable: %s", err);
	unsetenv("NKV_NIXL_TRADDR");
	unsetenv("NKV_NIXL_NSID");
	unsetenv("NKV_NIXL_SHM");
	unsetenv("NKV_NIXL_QUEUES");
}

static void t_status(void)
{
	struct {
		int rc, st;
	} m[] = {
		{0, NKV_NIXL_SUCCESS},
		{-ENOENT, NKV_NIXL_ERR_NOT_FOUND},
		{-ENXIO, NKV_NIXL_ERR_NOT_FOUND},
		{-EINVAL, NKV_NIXL_ERR_INVALID_PARAM},
		{-EFBIG, NKV_NIXL_ERR_INVALID_PARAM},
		{-EOPNOTSUPP, NKV_NIXL_ERR_NOT_SUPPORTED},
		{-EROFS, NKV_NIXL_ERR_NOT_ALLOWED},
		{-EACCES, NKV_NIXL_ERR_NOT_ALLOWED},
		{-EIO, NKV_NIXL_ERR_BACKEND},
		{-ETIMEDOUT, NKV_NIXL_ERR_BACKEND},
		{-ENOTCONN, NKV_NIXL_ERR_BACKEND},
		{-EAGAIN, NKV_NIXL_ERR_BACKEND},
		{-ENOSPC, NKV_NIXL_ERR_BACKEND},
		{-ENOMEM, NKV_NIXL_ERR_BACKEND},
		{-12345, NKV_NIXL_ERR_BACKEND},
	};
	for (size_t i = 0; i < N(m); i++)
		CHECK(nkv_nixl_status_from_errno(m[i].rc) == m[i].st, "errno %d -> %d", m[i].rc,
		      nkv_nixl_status_from_errno(m[i].rc));
	struct {
		uint16_t nvme;
		int st;
	} s[] = {
		{0x000, NKV_NIXL_SUCCESS},         {0x087, NKV_NIXL_ERR_NOT_FOUND},   /* Key Does Not Exist */
		{0x187, NKV_NIXL_ERR_NOT_FOUND},   {0x085, NKV_NIXL_ERR_INVALID_PARAM}, /* Invalid Value Size */
		{0x020, NKV_NIXL_ERR_NOT_ALLOWED}, /* Namespace Is Write Protected */
		{0x082, NKV_NIXL_ERR_BACKEND},     /* Namespace Not Ready */
		{0x081, NKV_NIXL_ERR_BACKEND},     /* Capacity Exceeded */
		{0x088, NKV_NIXL_ERR_BACKEND},     {0x370, NKV_NIXL_ERR_BACKEND}, /* Host Pathing Error */
		{0x001, NKV_NIXL_ERR_NOT_SUPPORTED}, /* Invalid Command Opcode */
		{0x00b, NKV_NIXL_ERR_NOT_FOUND},   /* Invalid Namespace */
	};
	for (size_t i = 0; i < N(s); i++)
		CHECK(nkv_nixl_status_from_nvme(s[i].nvme) == s[i].st, "NVMe %#x -> %d", s[i].nvme,
		      nkv_nixl_status_from_nvme(s[i].nvme));
	CHECK(strcmp(nkv_nixl_status_str(NKV_NIXL_ERR_NOT_FOUND), "NIXL_ERR_NOT_FOUND") == 0, "name");
	CHECK(strcmp(nkv_nixl_status_str(NKV_NIXL_IN_PROG), "NIXL_IN_PROG") == 0, "name");
	CHECK(strcmp(nkv_nixl_status_str(42), "NIXL_ERR_?") == 0, "unknown name");
	/* NIXL's values (nixl_types.h, backend API version 1) */
	CHECK(NKV_NIXL_IN_PROG == 1 && NKV_NIXL_SUCCESS == 0 && NKV_NIXL_ERR_NOT_POSTED == -1 &&
		      NKV_NIXL_ERR_INVALID_PARAM == -2 && NKV_NIXL_ERR_BACKEND == -3 && NKV_NIXL_ERR_NOT_FOUND == -4 &&
		      NKV_NIXL_ERR_MISMATCH == -5 && NKV_NIXL_ERR_NOT_ALLOWED == -6 &&
		      NKV_NIXL_ERR_REPOST_ACTIVE == -7 && NKV_NIXL_ERR_UNKNOWN == -8 &&
		      NKV_NIXL_ERR_NOT_SUPPORTED == -9 && NKV_NIXL_ERR_REMOTE_DISCONNECT == -10 &&
		      NKV_NIXL_ERR_CANCELED == -11,
	      "status values");
}

static void t_no_target(void)
{
	struct nkv_nixl *b = (struct nkv_nixl *)1;
	char err[256] = "";
	/* a closed port on loopback: refused at once */
	struct nkv_nixl_param p[] = {{"traddr", "127.0.0.1"}, {"port", "1"}, {"timeout_ms", "3000"}};
	int st = nkv_nixl_create(p, N(p), &b, err, sizeof(err));
	CHECK(st == NKV_NIXL_ERR_BACKEND && b == NULL && strstr(err, "127.0.0.1 port 1"), "closed port: %d '%s'", st,
	      err);
	struct nkv_nixl_param bad[] = {{"queues", "x"}};
	st = nkv_nixl_create(bad, 1, &b, err, sizeof(err));
	CHECK(st == NKV_NIXL_ERR_INVALID_PARAM && b == NULL && strstr(err, "queues"), "bad value: %d '%s'", st, err);
	CHECK(nkv_nixl_create(p, N(p), NULL, err, sizeof(err)) == NKV_NIXL_ERR_INVALID_PARAM, "NULL out");
	nkv_nixl_destroy(NULL);
	CHECK(nkv_nixl_post(NULL, NULL) == NKV_NIXL_ERR_INVALID_PARAM, "post NULL");
	CHECK(nkv_nixl_check(NULL, NULL) == NKV_NIXL_ERR_INVALID_PARAM, "check NULL");
	CHECK(nkv_nixl_release(NULL, NULL) == NKV_NIXL_ERR_INVALID_PARAM, "release NULL");
	CHECK(nkv_nixl_deregister(NULL, NULL) == NKV_NIXL_ERR_INVALID_PARAM, "deregister NULL");
	CHECK(nkv_nixl_md_zero_copy(NULL) == 0, "zero copy NULL");
	CHECK(nkv_nixl_md_obj(NULL, NULL, NULL, NULL, NULL) == -EINVAL, "md_obj NULL");
}

/* "paths": several paths for the multipath engine; with "shm" it is ambiguous: refused. */
static void t_paths(void)
{
	struct nkv_nixl_opts o;
	char err[160] = "";
	struct nkv_nixl_param p[] = {{"paths", "10.0.0.1:4420,10.0.0.2:4420"}};
	CHECK(nkv_nixl_parse_params(p, N(p), &o, err, sizeof(err)) == 0 && !strcmp(o.paths, p[0].value), "paths: %s",
	      err);
	struct nkv_nixl_param both[] = {{"paths", "10.0.0.1:4420,10.0.0.2:4420"}, {"shm", "/run/kv.sock"}};
	CHECK(nkv_nixl_parse_params(both, N(both), &o, err, sizeof(err)) == NKV_NIXL_ERR_INVALID_PARAM &&
		      strstr(err, "paths and shm"),
	      "paths with shm refused: %s", err);
	char longv[1100];
	memset(longv, 'a', sizeof(longv) - 1);
	longv[sizeof(longv) - 1] = 0;
	struct nkv_nixl_param lp = {"paths", longv};
	CHECK(nkv_nixl_parse_params(&lp, 1, &o, err, sizeof(err)) == NKV_NIXL_ERR_INVALID_PARAM && strstr(err, "paths"),
	      "paths too long: %s", err);
}

int main(void)
{
	t_defaults();
	t_values();
	t_env();
	t_status();
	t_no_target();
	t_paths();
	printf("%u passed, %u failed\n", h_pass, h_fail);
	return h_fail ? 1 : 0;
}
