/* SPDX-License-Identifier: Apache-2.0 */
/*
 * shm_host.h - the raw shared-memory host of the shm transport tests (shm_proto.c, shm_abuse.c):
 * one SOCK_SEQPACKET connection, HELLO and the register page, REG/DEREG of memfds, register access
 * and the main region at MAIN_IOVA. No libnkv: the tests must be able to send what libnkv never would.
 *
 * Only what both tests do the same way lives here. What a test checks differently (waiting for a
 * CQE, executing a command, allocating in the main region) stays in that test.
 */
#ifndef NKV_TEST_SHM_HOST_H
#define NKV_TEST_SHM_HOST_H

#include <stdbool.h>
#include <stdint.h>

#include "nkv/nkv_dev.h"
#include "nkv/nkv_shm.h"
#include "nkv/nkv_spec.h"

#define SC(sct, sc) ((int)(((unsigned)(sct) << 8) | (unsigned)(sc)))
#define ST_TIMEOUT (-1)                /* no CQE within the bound */
#define TMO_MS 5000                    /* every wait for the target is bounded by this */
#define PG 4096u
#define CC_ENABLE (NKV_CC_EN | (NKV_CC_CSS_IOCS << 4) | (6u << 16) | (4u << 20))
#define MAIN_IOVA 0x1000000000ull      /* each host's main region */

/** A raw host: its connection, the mapped register page, the main region and the admin queues. */
struct host {
	int sock;
	uint8_t *regs;
	uint32_t reg_size;
	struct nkv_shm_reply hello;
	int memfd;
	uint8_t *mem;            /* the main region, at MAIN_IOVA */
	uint64_t mem_len, brk;   /* bump allocator */
	struct nkv_dev_sq asq;
	struct nkv_dev_cq acq;
	uint16_t cid;
};

/** An I/O queue pair (SQ and CQ of the same QID). */
struct qpair {
	uint16_t qid;
	struct nkv_dev_sq sq;
	struct nkv_dev_cq cq;
};

/** CLOCK_MONOTONIC in milliseconds. */
uint64_t now_ms(void);

/** Register access through the mapped page: acquire loads and release stores, as the target polls it. */
uint32_t rd32(struct host *h, uint32_t off);
void wr32(struct host *h, uint32_t off, uint32_t v);
/** 64-bit registers (CAP, ASQ, ACQ) as two 32-bit accesses, low half first. */
uint64_t rd64(struct host *h, uint32_t off);
void wr64(struct host *h, uint32_t off, uint64_t v);

/** Fill a message header (magic, version, @op). */
void hdr_init(struct nkv_shm_hdr *hd, uint16_t op);

/**
 * Receive one reply within @ms, and the fd passed with it into *@fd (-1 if none; closed if @fd is NULL).
 * @return 1, 0 connection closed, -1 timeout or error.
 */
int recv_reply(int sock, struct nkv_shm_reply *rep, int *fd, int ms);

/** Is the socket closed (EOF or reset) by the peer within @ms? Data read meanwhile is dropped. */
bool sock_closed(int sock, int ms);

/** A SOCK_SEQPACKET connection to @path (a path too long is said on stderr). @return the fd or -1. */
int unix_connect(const char *path);

/**
 * Connect to @path and say HELLO as @hostid / @hostnqn; on success map the register page into h->regs.
 * @h is reset first, so host_close() is always safe afterwards.
 * @return 0, the reply's -errno, or -EPROTO (no reply, no fd, mmap failed).
 */
int host_hello(struct host *h, const char *path, const uint8_t hostid[16], const char *hostnqn);

/** Send REG or DEREG (@op) for @fd at @iova / @len / @off / @flags. @return the reply status, or -EPROTO without one. */
int host_req(struct host *h, uint16_t op, uint64_t iova, uint64_t len, uint64_t off, uint32_t flags, int fd);

/** A memfd of @len bytes, sealed against shrinking when @seal; mapped here at *@va unless @va is NULL. @return fd or -1. */
int mem_create(uint64_t len, bool seal, uint8_t **va);

/** Create a sealed main region of @len bytes, map it at h->mem and register it at MAIN_IOVA. @return 0 or -errno. */
int host_main_region(struct host *h, uint64_t len);

/** Close the connection and unmap everything; @h is left closed (fds -1), so a second call is harmless. */
void host_close(struct host *h);

/** The address here of @iova in the main region. */
void *hva(struct host *h, uint64_t iova);

/** Point @sq / @cq (rings at @sq_iova / @cq_iova in the main region) at queue @qid's doorbells. */
void host_rings(struct host *h, uint16_t qid, uint64_t sq_iova, uint16_t sqn, uint64_t cq_iova, uint16_t cqn,
		struct nkv_dev_sq *sq, struct nkv_dev_cq *cq);

/** Wait until any of @bits is set in CSTS, at most @ms. @return the last CSTS read. */
uint32_t wait_any(struct host *h, uint32_t bits, int ms);

/** The status code of a CQE: SCT << 8 | SC (the phase bit dropped). */
int cqe_code(const struct nkv_cqe *e);

/** Give @sqe the host's next CID and put it on @sq, ringing the doorbell. @return the slot, or < 0 when full. */
int submit(struct host *h, struct nkv_dev_sq *sq, struct nkv_sqe *sqe);

/** An admin SQE: @opc, CDW10, CDW11 and PRP1. */
struct nkv_sqe sqe_adm(uint8_t opc, uint32_t cdw10, uint32_t cdw11, uint64_t prp1);

#endif
