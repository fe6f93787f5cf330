/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_sqe.c - libFuzzer target over SQE parsing and execution: the input is a sequence of
 * records {queue (1 byte: even = admin, odd = I/O), SQE (64 bytes), data length (2 bytes LE),
 * data}, executed through the loop transport on the mem backend. Checks that every command
 * completes, with its own CID, and never reports more data than its buffer holds.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nkv/nkv_target.h"

static struct nkv_target *g_tgt;
static struct nkv_loop_ctrlr *g_ctrlr;
static struct nkv_loop_qp *g_io;
static uint8_t g_buf[65536 + 64];

static void setup(void)
{
	struct nkv_backend_conf bc = {.name = "mem", .mem_max_object = 1 << 20};
	struct nkv_ns_conf ns1 = {.nsid = 1, .rados_ns = "fuzz", .max_value = 65536};
	struct nkv_ns_conf ns2 = {.nsid = 2, .rados_ns = "fuzz", .read_only = true};
	struct nkv_subsys *ss;

	if (nkv_target_create(&bc, &g_tgt) || nkv_subsys_add(g_tgt, "nqn.fuzz", "pool", &ss) ||
	    nkv_ns_add(ss, &ns1) || nkv_ns_add(ss, &ns2) || nkv_loop_connect(g_tgt, "nqn.fuzz", "nqn.host", &g_ctrlr) ||
	    nkv_loop_enable(g_ctrlr) || nkv_loop_qp_create(g_ctrlr, 1, 16, &g_io))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!g_tgt)
		setup();
	while (size >= 67) {
		struct nkv_loop_qp *qp = (data[0] & 1) ? g_io : nkv_loop_admin_qp(g_ctrlr);
		struct nkv_sqe sqe;
		struct nkv_cqe cqe;
		uint32_t xfer = 0;

		memcpy(&sqe, data + 1, 64);
		uint32_t len = (uint32_t)data[65] | ((uint32_t)data[66] << 8);
		data += 67;
		size -= 67;
		if (qp != g_io && sqe.opc == 0x0c)
			sqe.opc = 0x18; /* an AER is held until reset: it would never complete here */
		uint32_t have = len < size ? len : (uint32_t)size;
		memset(g_buf, 0, sizeof(g_buf));
		memcpy(g_buf, data, have);
		data += have;
		size -= have;
		/* a guard after the buffer: the controller must never write past len */
		memset(g_buf + len, 0x5a, 64);
		if (nkv_loop_qp_exec(qp, &sqe, len ? g_buf : NULL, len, &cqe, &xfer) != 0)
			abort();
		if (xfer > len)
			abort();
		for (int i = 0; i < 64; i++)
			if (g_buf[len + i] != 0x5a)
				abort();
		if ((nkv_get16(&cqe.status) & 1) != 1)
			abort();
	}
	return 0;
}
