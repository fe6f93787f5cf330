/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_metrics.c - the core's metrics (nkv_target_metrics) and the daemon's Prometheus formatter
 * (tools/rados-nkv/metrics.c) in one process: commands through the loop transport (mem backend)
 * counted by kind and status class, bytes and latency buckets; the formatter's label escaping, its
 * size bound (namespaces past it left out and counted) and one HELP/TYPE pair per family.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "daemon.h"
#include "nkv/nkv_target.h"

/* An NQN with the characters the text format escapes (a label value must survive any name). */
#define NQN_ODD "nqn.2026-12.io.test:we\"ird\\name"
#define NQN "nqn.2026-12.io.test:metrics"

static unsigned exec_cmd(struct nkv_loop_qp *qp, uint8_t opc, uint32_t nsid, const char *key, unsigned klen,
			 uint32_t size, unsigned opts, void *buf, uint32_t len)
{
	struct nkv_sqe sqe;
	struct nkv_cqe cqe;
	uint32_t x = 0;

	nkv_sqe_kv(&sqe, opc, nsid, (const uint8_t *)key, klen, size, opts);
	assert_int_equal(nkv_loop_qp_exec(qp, &sqe, buf, len, &cqe, &x), 0);
	return (nkv_get16(&cqe.status) >> 1) & 0x7ff;
}

static const struct nkv_ns_metrics *find(const struct nkv_ns_metrics *v, int n, const char *nqn, uint32_t nsid)
{
	for (int i = 0; i < n; i++)
		if (strcmp(v[i].subnqn, nqn) == 0 && v[i].nsid == nsid)
			return &v[i];
	return NULL;
}

static void names_and_bounds(void **state)
{
	(void)state;
	assert_string_equal(nkv_metric_op_name(NKV_MOP_RETRIEVE_RANGE), "retrieve_range");
	assert_string_equal(nkv_metric_status_name(NKV_MST_NOT_FOUND), "not_found");
	assert_string_equal(nkv_metric_status_name(NKV_MST_EXEC_FAILED), "exec_failed");
	assert_int_equal(nkv_metric_lat_bound_us(0), 8);
	assert_int_equal(nkv_metric_lat_bound_us(1), 16);
	assert_int_equal(nkv_metric_lat_bound_us(20), 8u << 20);
	assert_true(nkv_metric_lat_bound_us(NKV_MLAT_BUCKETS - 1) == UINT64_MAX);
}

static void counted_by_kind_and_class(void **state)
{
	struct nkv_backend_conf bc = {.name = "mem"};
	struct nkv_target *tgt;
	struct nkv_subsys *ss;
	struct nkv_loop_ctrlr *c;
	struct nkv_loop_qp *qp;
	char val[3000], buf[4096];

	(void)state;
	memset(val, 'v', sizeof(val));
	assert_int_equal(nkv_target_create(&bc, &tgt), 0);
	assert_int_equal(nkv_subsys_add(tgt, NQN, "p", &ss), 0);
	assert_int_equal(nkv_ns_add(ss, &(struct nkv_ns_conf){.nsid = 1, .max_value = 2048}), 0);
	assert_int_equal(nkv_ns_add(ss, &(struct nkv_ns_conf){.nsid = 7, .rados_ns = "seven"}), 0);
	assert_int_equal(nkv_loop_connect(tgt, NQN, "nqn.test-host", &c), 0);
	assert_int_equal(nkv_loop_enable(c), 0);
	assert_int_equal(nkv_loop_qp_create(c, 1, 8, &qp), 0);

	assert_int_equal(exec_cmd(qp, NKV_KV_STORE, 1, "a", 1, 1000, 0, val, 1000), 0);
	assert_int_equal(exec_cmd(qp, NKV_KV_STORE, 1, "b", 1, 2000, 0, val, 2000), 0);
	assert_int_equal(exec_cmd(qp, NKV_KV_STORE, 1, "c", 1, 3000, 0, val, 3000), 0x85); /* > max value */
	assert_int_equal(exec_cmd(qp, NKV_KV_STORE, 1, "", 0, 1, 0, val, 1), 0x86);        /* key length 0 */
	assert_int_equal(exec_cmd(qp, NKV_KV_STORE, 1, "z", 1, 1, NKV_STORE_MUST_EXIST, val, 1), 0x87);
	assert_int_equal(exec_cmd(qp, NKV_KV_STORE, 1, "a", 1, 1, NKV_STORE_MUST_NOT_EXIST, val, 1), 0x89);
	assert_int_equal(exec_cmd(qp, NKV_KV_RETRIEVE, 1, "b", 1, sizeof(buf), 0, buf, sizeof(buf)), 0);
	assert_int_equal(exec_cmd(qp, NKV_KV_RETRIEVE, 1, "q", 1, sizeof(buf), 0, buf, sizeof(buf)), 0x87);
	assert_int_equal(exec_cmd(qp, 0xf2, 1, "a", 1, sizeof(buf), 0, buf, sizeof(buf)), 0); /* Range, offset 0 */
	assert_int_equal(exec_cmd(qp, NKV_KV_FLUSH, 1, "", 0, 0, 0, NULL, 0), 0);
	assert_int_equal(exec_cmd(qp, 0x81, 1, "a", 1, 0, 0, NULL, 0), 0x01); /* Exec not allowlisted */
	assert_int_equal(exec_cmd(qp, NKV_KV_DELETE, 7, "a", 1, 0, 0, NULL, 0), 0x87);
	assert_int_equal(exec_cmd(qp, NKV_KV_EXIST, 9, "a", 1, 0, 0, NULL, 0), 0x0b); /* no namespace 9 */

	struct nkv_ns_metrics *v;
	int n = nkv_target_metrics(tgt, &v);
	assert_int_equal(n, 2);
	const struct nkv_ns_metrics *m = find(v, n, NQN, 1), *m7 = find(v, n, NQN, 7);
	assert_non_null(m);
	assert_non_null(m7);
	assert_int_equal(m->cmds[NKV_MOP_STORE][NKV_MST_SUCCESS], 2);
	assert_int_equal(m->cmds[NKV_MOP_STORE][NKV_MST_SIZE], 2);
	assert_int_equal(m->cmds[NKV_MOP_STORE][NKV_MST_NOT_FOUND], 1);
	assert_int_equal(m->cmds[NKV_MOP_STORE][NKV_MST_EXISTS], 1);
	assert_int_equal(m->cmds[NKV_MOP_RETRIEVE][NKV_MST_SUCCESS], 1);
	assert_int_equal(m->cmds[NKV_MOP_RETRIEVE][NKV_MST_NOT_FOUND], 1);
	assert_int_equal(m->cmds[NKV_MOP_RETRIEVE_RANGE][NKV_MST_SUCCESS], 1);
	assert_int_equal(m->cmds[NKV_MOP_OTHER][NKV_MST_SUCCESS], 1);
	assert_int_equal(m->cmds[NKV_MOP_EXEC][NKV_MST_REFUSED], 1);
	assert_int_equal(m7->cmds[NKV_MOP_DELETE][NKV_MST_NOT_FOUND], 1);
	uint64_t all = 0, lat = 0;
	for (unsigned o = 0; o < NKV_MOP_COUNT; o++)
		for (unsigned s = 0; s < NKV_MST_COUNT; s++)
			all += m->cmds[o][s];
	for (unsigned g = 0; g < NKV_MLAT_COUNT; g++)
		for (unsigned b = 0; b < NKV_MLAT_BUCKETS; b++)
			lat += m->lat[g][b];
	assert_int_equal(all, 11); /* the command on namespace 9 counts nowhere: it named none */
	assert_int_equal(lat, all);
	uint64_t st = 0, rt = 0;
	for (unsigned b = 0; b < NKV_MLAT_BUCKETS; b++) {
		st += m->lat[NKV_MLAT_STORE][b];
		rt += m->lat[NKV_MLAT_RETRIEVE][b];
	}
	assert_int_equal(st, 6);
	assert_int_equal(rt, 3);
	assert_int_equal(m->bytes_written[NKV_MOP_STORE], 3000);
	assert_int_equal(m->bytes_read[NKV_MOP_RETRIEVE], 2000);
	assert_int_equal(m->bytes_read[NKV_MOP_RETRIEVE_RANGE], 1000);
	assert_int_equal(m->in_flight, 0);
	assert_int_equal(m->max_value, 2048);

	struct nkv_ns_stats s;
	assert_int_equal(nkv_ns_stats(ss, 1, &s), 0);
	assert_int_equal(s.stores, 6);
	assert_int_equal(s.retrieves, 3);
	assert_int_equal(s.others, 2);
	assert_int_equal(s.errors, 6);
	assert_int_equal(s.bytes_written, 3000);
	assert_int_equal(s.bytes_read, 3000);
	free(v);
	nkv_loop_qp_destroy(qp);
	nkv_loop_disconnect(c);
	nkv_target_destroy(tgt);
}

static size_t count(const char *hay, const char *needle)
{
	size_t n = 0;
	for (const char *p = hay; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

static void render_escapes_and_bounds(void **state)
{
	struct nkv_backend_conf bc = {.name = "mem"};
	struct nkv_target *tgt;
	struct nkv_subsys *ss;
	char *text, *small;
	size_t len, slen;

	(void)state;
	assert_int_equal(nkv_target_create(&bc, &tgt), 0);
	assert_int_equal(nkv_subsys_add(tgt, NQN_ODD, "p", &ss), 0);
	for (uint32_t i = 1; i <= 12; i++)
		assert_int_equal(nkv_ns_add(ss, &(struct nkv_ns_conf){.nsid = i}), 0);

	assert_int_equal(metrics_render(tgt, 16u << 20, &text, &len), 0);
	assert_int_equal(strlen(text), len);
	assert_non_null(strstr(text, "subsystem=\"nqn.2026-12.io.test:we\\\"ird\\\\name\",nsid=\"12\""));
	assert_non_null(strstr(text, "rados_nkv_metrics_namespaces_omitted 0\n"));
	assert_int_equal(count(text, "# TYPE rados_nkv_commands_total counter\n"), 1);
	assert_int_equal(count(text, "# TYPE rados_nkv_command_latency_seconds histogram\n"), 1);
	assert_int_equal(count(text, "# HELP "), count(text, "# TYPE "));
	/* 22 buckets + sum + count, 3 groups, 12 namespaces */
	assert_int_equal(count(text, "rados_nkv_command_latency_seconds_bucket{"), 22 * 3 * 12);
	assert_non_null(strstr(text, ",le=\"0.000008\"} 0\n"));
	assert_non_null(strstr(text, ",le=\"8.388608\"} 0\n"));
	assert_non_null(strstr(text, ",le=\"+Inf\"} 0\n"));
	assert_null(strstr(text, "rados_nkv_transport")); /* no transport started: no family at all */

	/* Room for about a third: the rest are left out whole and counted. */
	size_t max = len / 3;
	assert_int_equal(metrics_render(tgt, max, &small, &slen), 0);
	assert_true(slen <= max);
	unsigned kept = (unsigned)count(small, "rados_nkv_namespace_in_flight{");
	char want[64];
	snprintf(want, sizeof(want), "rados_nkv_metrics_namespaces_omitted %u\n", 12 - kept);
	assert_true(kept >= 1 && kept < 12);
	assert_non_null(strstr(small, want));
	assert_int_equal(count(small, "rados_nkv_command_latency_seconds_bucket{"), 22 * 3 * kept);
	free(small);

	/* Too small for any namespace: still a valid text with the count. */
	assert_int_equal(metrics_render(tgt, 100, &small, &slen), 0);
	assert_non_null(strstr(small, "rados_nkv_metrics_namespaces_omitted 12\n"));
	assert_null(strstr(small, "rados_nkv_commands_total"));
	free(small);
	free(text);
	nkv_target_destroy(tgt);
}

/* A cache namespace's figures (nkv_ns_cache_usage through nkv_target_metrics) and their families: the
 * policy as configured, the entries stored, nothing for a namespace without a cache. */
static void render_cache_families(void **state)
{
	struct nkv_backend_conf bc = {.name = "mem", .gateway = "gw-test"};
	struct nkv_cache_policy pol = {.capacity_bytes = 1 << 20, .capacity_keys = 1000, .pin_quota_bytes = 256 << 10,
				       .default_ttl_s = 3600, .bytes_per_token = 131072};
	struct nkv_target *tgt;
	struct nkv_subsys *ss;
	struct nkv_loop_ctrlr *c;
	struct nkv_loop_qp *qp;
	char val[3000], *text;
	size_t len;

	(void)state;
	memset(val, 'v', sizeof(val));
	assert_int_equal(nkv_target_create(&bc, &tgt), 0);
	assert_int_equal(nkv_subsys_add(tgt, NQN, "p", &ss), 0);
	assert_int_equal(nkv_ns_add(ss, &(struct nkv_ns_conf){.nsid = 1, .rados_ns = "cached", .cache = &pol}), 0);
	assert_int_equal(nkv_ns_add(ss, &(struct nkv_ns_conf){.nsid = 2, .rados_ns = "plain"}), 0);
	assert_int_equal(nkv_loop_connect(tgt, NQN, "nqn.test-host", &c), 0);
	assert_int_equal(nkv_loop_enable(c), 0);
	assert_int_equal(nkv_loop_qp_create(c, 1, 8, &qp), 0);
	assert_int_equal(exec_cmd(qp, NKV_KV_STORE, 1, "a", 1, 1000, 0, val, 1000), 0);
	assert_int_equal(exec_cmd(qp, NKV_KV_STORE, 1, "b", 1, 3000, 0, val, 3000), 0);
	assert_int_equal(exec_cmd(qp, NKV_KV_STORE, 2, "a", 1, 1000, 0, val, 1000), 0);

	struct nkv_ns_metrics *v;
	int n = nkv_target_metrics(tgt, &v);
	assert_int_equal(n, 2);
	const struct nkv_ns_metrics *m1 = find(v, n, NQN, 1), *m2 = find(v, n, NQN, 2);
	assert_true(m1->cache);
	assert_false(m2->cache);
	assert_int_equal(m1->cache_usage.policy.capacity_bytes, 1 << 20);
	assert_int_equal(m1->cache_usage.policy.pin_quota_bytes, 256 << 10);
	free(v);

	/* Usage is read back within about a second: wait for the two entries to show. */
	for (int i = 0; i < 100; i++) {
		assert_int_equal(metrics_render(tgt, 16u << 20, &text, &len), 0);
		if (strstr(text, "rados_nkv_cache_keys{subsystem=\"" NQN "\",nsid=\"1\"} 2\n"))
			break;
		free(text);
		text = NULL;
		usleep(50000);
	}
	assert_non_null(text);
	const char *lbl = "{subsystem=\"" NQN "\",nsid=\"1\"} ";
	char want[256];
	static const struct {
		const char *name;
		const char *v;
	} lines[] = {
		{"rados_nkv_cache_used_bytes", "4000"},         {"rados_nkv_cache_keys", "2"},
		{"rados_nkv_cache_pinned_bytes", "0"},          {"rados_nkv_cache_pinned_keys", "0"},
		{"rados_nkv_cache_capacity_bytes", "1048576"},  {"rados_nkv_cache_capacity_keys", "1000"},
		{"rados_nkv_cache_pin_quota_bytes", "262144"},  {"rados_nkv_cache_evictions_total", "0"},
		{"rados_nkv_cache_evicted_bytes_total", "0"},   {"rados_nkv_cache_expirations_total", "0"},
		{"rados_nkv_cache_expired_bytes_total", "0"},   {"rados_nkv_cache_pinned_byte_hours", "0"},
		{"rados_nkv_cache_pinned_token_hours", "0"},    {"rados_nkv_cache_gateways", "1"},
	};
	for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
		snprintf(want, sizeof(want), "\n%s%s%s\n", lines[i].name, lbl, lines[i].v);
		if (!strstr(text, want))
			fail_msg("missing: %s", want + 1);
		snprintf(want, sizeof(want), "# TYPE %s ", lines[i].name);
		assert_int_equal(count(text, want), 1);
	}
	assert_non_null(strstr(text, "# TYPE rados_nkv_cache_evictions_total counter\n"));
	assert_non_null(strstr(text, "# TYPE rados_nkv_cache_pinned_byte_hours gauge\n"));
	assert_non_null(strstr(text, "\nrados_nkv_cache_eviction_lease{subsystem=\"" NQN "\",nsid=\"1\"} "));
	assert_null(strstr(text, "rados_nkv_cache_keys{subsystem=\"" NQN "\",nsid=\"2\"}")); /* no cache there */
	assert_null(strstr(text, "rados_nkv_cache_events_")); /* no event publisher in this process */
	free(text);
	nkv_loop_qp_destroy(qp);
	nkv_loop_disconnect(c);
	nkv_target_destroy(tgt);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(names_and_bounds),
		cmocka_unit_test(counted_by_kind_and_class),
		cmocka_unit_test(render_escapes_and_bounds),
		cmocka_unit_test(render_cache_families),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
