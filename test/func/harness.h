/* SPDX-License-Identifier: Apache-2.0 */
/*
 * harness.h - functional tests against the backend named by the first argument: `mem`, or `rados`
 * (the micro cluster named by $NKV_CEPH_CONF, $NKV_CEPH_KEYRING, $NKV_CEPH_USER, $NKV_CEPH_POOL),
 * through the transport named by the second: `loop` (default; in-process), `tcp` (libnkv over
 * loopback NVMe/TCP to the target's TCP transport in this process), `tcp-digest` (the same with
 * header and data digests), `shm` (libnkv's PCIe-style driver to the target's shared-memory
 * transport in this process, on a Unix socket in $TMPDIR) or `vfio-user` (the same driver and
 * controller, reached over vfio-user). Without a cluster a rados run exits 77 (skip), unless
 * $NKV_REQUIRE_RADOS=1, when it fails. Every check counts; the last line is "N passed, N failed".
 */
#ifndef NKV_TEST_HARNESS_H
#define NKV_TEST_HARNESS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "check.h"
#include "nkv/nkv.h"
#include "nkv/nkv_spec.h"
#include "nkv/nkv_target.h"

#define SUBNQN "nqn.2026-11.io.rados-nkv:test"
#define HOSTNQN "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-000000000001"
/* The host ID the TCP runs connect with (the loop transport has none: all zeros). */
static const uint8_t H_HOSTID[16] = {0, 0, 0, 0, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, 1};

struct h_env {
	const char *backend;
	char pool[128];
	char rados_ns[64];   /* unique per run, so runs never see each other's keys */
	const char *ceph_conf, *keyring, *user;
	struct nkv_backend_conf bc; /* what the target was created with (h_target_new) */
	struct nkv_target *tgt;
	struct nkv_subsys *ss;
	const char *transport;    /* "loop", "tcp", "tcp-digest", "shm" or "vfio-user" */
	bool vfio_user;           /* the shm transport's controller reached over vfio-user */
	struct nkv_tcp *tcp;      /* NULL unless over TCP */
	char port[16];            /* the TCP listener's port */
	struct nkv_shm *shm;      /* NULL unless over shm or vfio-user */
	char sock[108];           /* the shm (or vfio-user) listener's socket path */
};

/** A controller and a queue pair through whichever transport the test runs on. */
struct h_ctrl;
struct h_qp;

extern struct h_env H;
/** Status as SCT << 8 | SC, for comparisons in checks. */
#define SC(sct, sc) (((sct) << 8) | (sc))
static inline unsigned h_status(const struct nkv_cqe *c)
{
	return (nkv_get16(&c->status) >> 1) & 0x7ff;
}
static inline bool h_dnr(const struct nkv_cqe *c)
{
	return (nkv_get16(&c->status) >> 15) & 1;
}

/** Parse argv, create the target and subsystem (NSIDs added by the test). Exits 77 to skip. */
void h_init(int argc, char **argv, const char *name);
/** Add namespace @nsid on RADOS namespace "<run-unique>-<suffix>". */
void h_add_ns(uint32_t nsid, const char *suffix, uint64_t max_value, bool read_only);
/** The same with a cache (@p; NULL: none) on subsystem @ss (NULL: the test's). Exits on failure. */
void h_add_ns_cache(struct nkv_subsys *ss, uint32_t nsid, const char *suffix, const struct nkv_cache_policy *p);
/** Another target (gateway @gateway) on the same backend, with the test's subsystem in it. */
struct nkv_target *h_target_new(const char *gateway, struct nkv_subsys **ss);
/** Connect and enable a controller, with its admin queue ready. Exits on failure. */
struct h_ctrl *h_connect(void);
void h_disconnect(struct h_ctrl *c);
struct h_qp *h_admin_qp(struct h_ctrl *c);
/** Create an I/O queue pair (@qid is used by the loop transport; TCP picks its own). NULL on failure. */
struct h_qp *h_qp_create(struct h_ctrl *c, uint16_t qid, uint16_t depth);
void h_qp_destroy(struct h_qp *q);
/** The loop transport's controller, for loop-only register tests (NULL over TCP and shm). */
struct nkv_loop_ctrlr *h_loop(struct h_ctrl *c);
/** libnkv's controller and I/O queue pair (NULL over loop). */
struct nkv_ctrl *h_lib(struct h_ctrl *c);
struct nkv_qpair *h_lib_qp(struct h_qp *q);
/** Is this run over NVMe/TCP? */
static inline bool h_is_tcp(void)
{
	return H.tcp != NULL;
}
/** Start the shm transport (H.shm) listening on H.sock, as nkv_shm.h's socket or vfio-user's. */
int h_shm_start(void);
/** Is this run over the shared-memory (PCIe-style) transport (its socket or vfio-user)? */
static inline bool h_is_shm(void)
{
	return H.shm != NULL;
}
/** Is this run over the in-process loop transport? */
static inline bool h_is_loop(void)
{
	return !h_is_tcp() && !h_is_shm();
}

/** Run one command synchronously. @return 0 with *cqe filled, or -errno (transport failure). */
int h_exec(struct h_qp *q, const struct nkv_sqe *sqe, void *buf, uint32_t len, struct nkv_cqe *cqe, uint32_t *xfer);
/** Print the summary line and return the exit code. Destroys the target. */
int h_finish(void);

/** Run one KV command synchronously. @return status (SCT << 8 | SC); fills dw0 and xfer when not NULL. */
unsigned h_kv(struct h_qp *qp, uint8_t opc, uint32_t nsid, const void *key, unsigned klen,
	      uint32_t size, unsigned opts, void *buf, uint32_t len, uint32_t *dw0, uint32_t *xfer);
/** Run one admin command; the SQE's cdw10.. given. */
unsigned h_admin(struct h_qp *qp, const struct nkv_sqe *sqe, void *buf, uint32_t len, uint32_t *dw0);

/**
 * Run Ceph's @tool ("rados", "ceph") against the test cluster with the given arguments (NULL
 * terminated), adding -c, -n and --keyring. @return the tool's exit status, or -1.
 */
int h_ceph_tool(const char *tool, ...);

/** Deterministic value bytes for (seed, length): a reader can verify any value it gets back. */
void h_fill(uint8_t *buf, uint32_t len, uint64_t seed);
bool h_verify(const uint8_t *buf, uint32_t len, uint64_t seed);
uint64_t h_rand(uint64_t *state);

#endif
