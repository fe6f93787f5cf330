/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nkv_spec.h - NVMe wire structures used by rados-nkv: SQE/CQE, status codes, the Key Value command
 * set (CSI 01h), Identify data, log pages and feature identifiers.
 *
 * Every multi-byte field is little-endian on the wire. Structures use fixed-width fields in natural
 * alignment (no bitfields, no packing pragmas) and a _Static_assert pins each size and each offset a
 * host depends on. Read and write fields through the nkv_get/put helpers so the code stays correct
 * on a big-endian host. Usable from C11, C++ and CUDA (NKV_HD marks host+device helpers).
 */
#ifndef NKV_SPEC_H
#define NKV_SPEC_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define NKV_HD __host__ __device__
#else
#define NKV_HD
#endif

#if defined(__cplusplus)
#define NKV_STATIC_ASSERT(c, m) static_assert(c, m)
extern "C" {
#else
#define NKV_STATIC_ASSERT(c, m) _Static_assert(c, m)
#endif

#define NKV_SIZE(t, n) NKV_STATIC_ASSERT(sizeof(t) == (n), #t " size")
#define NKV_OFF(t, f, n) NKV_STATIC_ASSERT(offsetof(t, f) == (n), #t "." #f " offset")

/* ---- little-endian accessors ------------------------------------------------------------------- */

/** Load/store a little-endian 16/32/64-bit value at any alignment. */
static inline NKV_HD uint16_t nkv_get16(const void *p)
{
	const uint8_t *b = (const uint8_t *)p;
	return (uint16_t)(b[0] | (b[1] << 8));
}
static inline NKV_HD uint32_t nkv_get32(const void *p)
{
	const uint8_t *b = (const uint8_t *)p;
	return (uint32_t)b[0] | ((uint32_t)b[1] << 8) | ((uint32_t)b[2] << 16) | ((uint32_t)b[3] << 24);
}
static inline NKV_HD uint64_t nkv_get64(const void *p)
{
	const uint8_t *b = (const uint8_t *)p;
	return (uint64_t)nkv_get32(b) | ((uint64_t)nkv_get32(b + 4) << 32);
}
static inline NKV_HD void nkv_put16(void *p, uint16_t v)
{
	uint8_t *b = (uint8_t *)p;
	b[0] = (uint8_t)v;
	b[1] = (uint8_t)(v >> 8);
}
static inline NKV_HD void nkv_put32(void *p, uint32_t v)
{
	uint8_t *b = (uint8_t *)p;
	b[0] = (uint8_t)v;
	b[1] = (uint8_t)(v >> 8);
	b[2] = (uint8_t)(v >> 16);
	b[3] = (uint8_t)(v >> 24);
}
static inline NKV_HD void nkv_put64(void *p, uint64_t v)
{
	nkv_put32(p, (uint32_t)v);
	nkv_put32((uint8_t *)p + 4, (uint32_t)(v >> 32));
}

/* ---- Submission and completion queue entries (docs/nvme-kv-wire.md B.1, B.2) ---------------------- */

/** 64-byte submission queue entry. Fields are raw little-endian; use the nkv_sqe_* helpers. */
struct nkv_sqe {
	uint8_t opc;       /* opcode */
	uint8_t flags;     /* FUSE 1:0, PSDT 7:6 */
	uint16_t cid;      /* command identifier */
	uint32_t nsid;     /* namespace */
	uint32_t cdw2;     /* KV: key bytes 0..3 */
	uint32_t cdw3;     /* KV: key bytes 4..7 */
	uint64_t mptr;     /* metadata pointer; unused by KV, but Store TTL's block hash (NKV_TTL_HASH) */
	uint8_t dptr[16];  /* PRP1/PRP2 or SGL1 */
	uint32_t cdw10;    /* KV: value size (Store) / host buffer size (Retrieve, List) */
	uint32_t cdw11;    /* KV: KL 7:0, options 15:8 */
	uint32_t cdw12;
	uint32_t cdw13;
	uint32_t cdw14;    /* KV: key bytes 8..11 */
	uint32_t cdw15;    /* KV: key bytes 12..15 */
};
NKV_SIZE(struct nkv_sqe, 64);
NKV_OFF(struct nkv_sqe, cid, 2);
NKV_OFF(struct nkv_sqe, nsid, 4);
NKV_OFF(struct nkv_sqe, cdw2, 8);
NKV_OFF(struct nkv_sqe, mptr, 16);
NKV_OFF(struct nkv_sqe, dptr, 24);
NKV_OFF(struct nkv_sqe, cdw10, 40);
NKV_OFF(struct nkv_sqe, cdw11, 44);
NKV_OFF(struct nkv_sqe, cdw14, 56);

#define NKV_SQE_FUSE_MASK 0x03u
#define NKV_SQE_PSDT_SHIFT 6
#define NKV_PSDT_PRP 0u
#define NKV_PSDT_SGL 1u
#define NKV_SQE_PSDT_MASK 0xc0u
#define NKV_SQE_PSDT_SGL 0x40u /* PSDT 01b: SGL for data (fabrics require it) */

/** 16-byte completion queue entry. */
struct nkv_cqe {
	uint32_t dw0;
	uint32_t dw1;
	uint16_t sqhd;   /* SQ head after this command was consumed */
	uint16_t sqid;
	uint16_t cid;
	uint16_t status; /* P bit 0, SC 8:1, SCT 11:9, CRD 13:12, M 14, DNR 15 */
};
NKV_SIZE(struct nkv_cqe, 16);
NKV_OFF(struct nkv_cqe, sqhd, 8);
NKV_OFF(struct nkv_cqe, cid, 12);
NKV_OFF(struct nkv_cqe, status, 14);

/*
 * An NVMe status is carried in rados-nkv as the 15-bit status field without the phase bit:
 * SC 7:0, SCT 10:8, CRD 12:11, M 13, DNR 14. The CQE status word is (status << 1) | phase.
 */
typedef uint16_t nkv_status;

#define NKV_SCT_GENERIC 0u
#define NKV_SCT_CMD 1u
#define NKV_SCT_MEDIA 2u
#define NKV_SCT_PATH 3u
#define NKV_SCT_VENDOR 7u
#define NKV_STATUS_DNR 0x4000u

/** Build a status from type, code and the Do Not Retry flag. */
static inline NKV_HD nkv_status nkv_status_make(unsigned sct, unsigned sc, int dnr)
{
	return (nkv_status)((sc & 0xffu) | ((sct & 7u) << 8) | (dnr ? NKV_STATUS_DNR : 0u));
}
static inline NKV_HD unsigned nkv_status_sc(nkv_status s) { return s & 0xffu; }
static inline NKV_HD unsigned nkv_status_sct(nkv_status s) { return (s >> 8) & 7u; }
static inline NKV_HD int nkv_status_dnr(nkv_status s) { return (s & NKV_STATUS_DNR) != 0; }
/** Status without DNR/M/CRD: what a host compares against a status code. */
static inline NKV_HD unsigned nkv_status_code(nkv_status s) { return s & 0x7ffu; }

/* Generic command status (SCT 0) */
#define NKV_SC_SUCCESS 0x00
#define NKV_SC_INVALID_OPCODE 0x01
#define NKV_SC_INVALID_FIELD 0x02
#define NKV_SC_CID_CONFLICT 0x03
#define NKV_SC_DATA_TRANSFER_ERROR 0x04
#define NKV_SC_ABORTED_POWER_LOSS 0x05
#define NKV_SC_INTERNAL 0x06
#define NKV_SC_ABORTED_BY_REQUEST 0x07
#define NKV_SC_ABORTED_SQ_DELETION 0x08
#define NKV_SC_INVALID_NS 0x0b
#define NKV_SC_CMD_SEQUENCE_ERROR 0x0c
#define NKV_SC_INVALID_SGL_SEG 0x0d
#define NKV_SC_DATA_SGL_LENGTH_INVALID 0x0f
#define NKV_SC_SGL_DESC_TYPE_INVALID 0x11
#define NKV_SC_INVALID_PRP_OFFSET 0x13
#define NKV_SC_SGL_OFFSET_INVALID 0x16
#define NKV_SC_HOSTID_INCONSISTENT 0x18
#define NKV_SC_KATO_EXPIRED 0x19
#define NKV_SC_NS_WRITE_PROTECTED 0x20
/* Key Value command set specific codes (SCT 0, range 80h-BFh; docs/nvme-kv-wire.md A.6) */
#define NKV_SC_KV_CAPACITY_EXCEEDED 0x81
#define NKV_SC_KV_NS_NOT_READY 0x82
#define NKV_SC_KV_RESERVATION_CONFLICT 0x83
#define NKV_SC_KV_FORMAT_IN_PROGRESS 0x84
#define NKV_SC_KV_INVALID_VALUE_SIZE 0x85
#define NKV_SC_KV_INVALID_KEY_SIZE 0x86
#define NKV_SC_KV_KEY_NOT_EXIST 0x87
#define NKV_SC_KV_UNRECOVERED_ERROR 0x88
#define NKV_SC_KV_KEY_EXISTS 0x89
/* Command specific status (SCT 1) */
#define NKV_SC_CQ_INVALID 0x00
#define NKV_SC_INVALID_QUEUE_ID 0x01
#define NKV_SC_INVALID_QUEUE_SIZE 0x02
#define NKV_SC_ABORT_LIMIT_EXCEEDED 0x03
#define NKV_SC_AER_LIMIT_EXCEEDED 0x05
#define NKV_SC_INVALID_LOG_PAGE 0x09
#define NKV_SC_INVALID_QUEUE_DELETION 0x0c
#define NKV_SC_FEATURE_NOT_SAVEABLE 0x0d
#define NKV_SC_FEATURE_NOT_CHANGEABLE 0x0e
#define NKV_SC_IOCS_NOT_SUPPORTED 0x29
#define NKV_SC_IOCS_NOT_ENABLED 0x2a
#define NKV_SC_IOCS_COMBINATION_REJECTED 0x2b
#define NKV_SC_INVALID_IOCS 0x2c
/* Fabrics command specific (SCT 1) */
#define NKV_SC_CONNECT_INVALID_PARAM 0x82
#define NKV_SC_CONNECT_INVALID_HOST 0x84
/* Path related status (SCT 3); ANA statuses are retryable on another path (DNR clear). */
#define NKV_SC_PATH_INTERNAL 0x00
#define NKV_SC_ANA_PERSISTENT_LOSS 0x01
#define NKV_SC_ANA_INACCESSIBLE 0x02
#define NKV_SC_ANA_TRANSITION 0x03
#define NKV_SC_CTRL_PATH_ERROR 0x60
#define NKV_SC_HOST_PATH_ERROR 0x70
#define NKV_SC_HOST_ABORTED 0x71

/* ---- Admin opcodes ------------------------------------------------------------------------------ */
#define NKV_ADM_DELETE_SQ 0x00
#define NKV_ADM_CREATE_SQ 0x01
#define NKV_ADM_GET_LOG_PAGE 0x02
#define NKV_ADM_DELETE_CQ 0x04
#define NKV_ADM_CREATE_CQ 0x05
#define NKV_ADM_IDENTIFY 0x06
#define NKV_ADM_ABORT 0x08
#define NKV_ADM_SET_FEATURES 0x09
#define NKV_ADM_GET_FEATURES 0x0a
#define NKV_ADM_ASYNC_EVENT 0x0c
#define NKV_ADM_KEEP_ALIVE 0x18
#define NKV_ADM_FABRICS 0x7f

/* ---- Key Value command set (CSI 01h; docs/nvme-kv-wire.md A.1-A.4) ------------------------------ */
#define NKV_CSI_NVM 0x00
#define NKV_CSI_KV 0x01
#define NKV_CSI_ZNS 0x02

#define NKV_KV_FLUSH 0x00
#define NKV_KV_STORE 0x01
#define NKV_KV_RETRIEVE 0x02
#define NKV_KV_LIST 0x06
#define NKV_KV_DELETE 0x10
#define NKV_KV_EXIST 0x14

#define NKV_KEY_MAX 16u
/* Store options (CDW11 bits 15:8, given here as bits of that byte) */
#define NKV_STORE_MUST_EXIST 0x01u   /* bit 8: update only */
#define NKV_STORE_MUST_NOT_EXIST 0x02u /* bit 9: create only */
#define NKV_STORE_NO_COMPRESS 0x04u  /* bit 10 */
/* Retrieve options */
#define NKV_RETRIEVE_RAW 0x01u       /* bit 8 */

/** Write a key of @klen bytes into an SQE: bytes 0..7 at SQE 8..15, bytes 8..15 at SQE 56..63. */
static inline NKV_HD void nkv_sqe_set_key(struct nkv_sqe *sqe, const uint8_t *key, unsigned klen)
{
	uint8_t k[16] = {0};
	for (unsigned i = 0; i < klen && i < 16; i++)
		k[i] = key[i];
	memcpy(&sqe->cdw2, k, 8);
	memcpy(&sqe->cdw14, k + 8, 8);
	nkv_put32(&sqe->cdw11, (nkv_get32(&sqe->cdw11) & ~0xffu) | (klen & 0xffu));
}
/** Read the 16 key bytes of an SQE (bytes past KL are the host's don't-care bytes). */
static inline NKV_HD void nkv_sqe_get_key(const struct nkv_sqe *sqe, uint8_t key[16])
{
	memcpy(key, &sqe->cdw2, 8);
	memcpy(key + 8, &sqe->cdw14, 8);
}
static inline NKV_HD unsigned nkv_sqe_klen(const struct nkv_sqe *sqe)
{
	return nkv_get32(&sqe->cdw11) & 0xffu;
}
static inline NKV_HD unsigned nkv_sqe_kv_opts(const struct nkv_sqe *sqe)
{
	return (nkv_get32(&sqe->cdw11) >> 8) & 0xffu;
}

/**
 * Build a KV command. @size is CDW10: the value size (Store) or host buffer size (Retrieve, List).
 * The caller fills CID and DPTR.
 */
static inline NKV_HD void nkv_sqe_kv(struct nkv_sqe *sqe, uint8_t opc, uint32_t nsid, const uint8_t *key,
				     unsigned klen, uint32_t size, unsigned opts)
{
	memset(sqe, 0, sizeof(*sqe));
	sqe->opc = opc;
	nkv_put32(&sqe->nsid, nsid);
	nkv_put32(&sqe->cdw10, size);
	nkv_put32(&sqe->cdw11, (opts & 0xffu) << 8);
	nkv_sqe_set_key(sqe, key, klen);
}

/*
 * ---- rados-nkv vendor Exec: allowlisted RADOS class methods (KV command set, opcodes 80h-EFh) ----
 * Each namespace maps vendor opcodes to class methods (its allowlist); an opcode that is not in it is
 * Invalid Command Opcode. F0h-FFh are not Exec opcodes: see "built-in vendor commands" below. The
 * opcode's bits 1:0 give the data direction (NVMe base spec):
 *   00b  no data: the input is the allowlisted bound input + the inline bytes;
 *   01b  host to controller: the host buffer (CDW10 bytes) is appended to the bound input;
 *   10b  controller to host: the output lands in the host buffer (CDW10 = its size), truncated
 *        when larger, with the full output length in CQE DW0 (as Retrieve does);
 *   11b  never allowlisted.
 * The key is in CDW2-3/14-15 with its length in CDW11 bits 7:0, as for Store. CDW11 bits 11:8 count
 * the inline input bytes (0-8) carried in CDW12-13 (directions 00b and 10b), appended to the bound
 * input; CDW11 bits 15:12 are reserved (Invalid Field when set). CQE DW0 = the method's output length
 * on success, the method's errno (positive) on NKV_SC_EXEC_FAILED.
 */
#define NKV_EXEC_OPC_FIRST 0x80
#define NKV_EXEC_INLINE_MAX 8u
#define NKV_XFER_NONE 0u
#define NKV_XFER_H2C 1u
#define NKV_XFER_C2H 2u
#define NKV_XFER_BIDI 3u
/* Vendor specific status codes (SCT 0, C0h-FFh) */
#define NKV_SC_EXEC_UNAVAILABLE 0xc0 /* the class or method is not loaded on the OSD (-EOPNOTSUPP) */
#define NKV_SC_EXEC_FAILED 0xc1      /* the method returned an error; DW0 = its errno */

/** Data direction of an opcode (bits 1:0): NKV_XFER_*. */
static inline NKV_HD unsigned nkv_opc_xfer(uint8_t opc)
{
	return opc & 3u;
}
/** Inline input length of an Exec SQE (CDW11 bits 11:8). */
static inline NKV_HD unsigned nkv_sqe_exec_inline_len(const struct nkv_sqe *sqe)
{
	return (nkv_get32(&sqe->cdw11) >> 8) & 0xfu;
}

/**
 * Build a vendor Exec command: @size is CDW10 (input size for direction 01b, host buffer size for
 * 10b, 0 for 00b); @inl (up to 8 bytes, @inl_len of them) goes to CDW12-13. The caller fills CID and
 * DPTR.
 */
static inline NKV_HD void nkv_sqe_exec(struct nkv_sqe *sqe, uint8_t opc, uint32_t nsid, const uint8_t *key,
				       unsigned klen, uint32_t size, const uint8_t *inl, unsigned inl_len)
{
	uint8_t b[8] = {0};
	if (inl_len > NKV_EXEC_INLINE_MAX)
		inl_len = NKV_EXEC_INLINE_MAX;
	for (unsigned i = 0; i < inl_len; i++)
		b[i] = inl[i];
	nkv_sqe_kv(sqe, opc, nsid, key, klen, size, 0);
	nkv_put32(&sqe->cdw11, nkv_get32(&sqe->cdw11) | (inl_len << 8));
	memcpy(&sqe->cdw12, b, 8);
}

/*
 * ---- rados-nkv built-in vendor commands (KV command set, opcodes F0h-FFh) ----------------------
 * Opcodes F0h-FFh are rados-nkv's own vendor commands, served on every KV namespace; an Exec
 * allowlist may use 80h-EFh only (the target refuses F0h-FFh in one). Each follows the NVMe
 * direction rule of bits 1:0. An unassigned one is Invalid Command Opcode (01h). The Commands
 * Supported and Effects log (05h, CSI 01h) lists the assigned ones.
 *
 * Retrieve Range (F2h, controller to host): Retrieve's layout (key in CDW2-3/14-15, its length in
 * CDW11 bits 7:0, CDW10 = Host Buffer Size) plus a 64-bit byte offset into the value in CDW12
 * (low) and CDW13 (high). Moves min(HBS, value size - offset) bytes starting at the offset (none
 * when the offset is at or past the end: success, like pread at end of file). CQE DW0 = the full
 * value size, as Retrieve. CDW11 bits 15:8 are reserved (Invalid Field when set). Statuses as
 * Retrieve (87h for an absent key). Lets a host read part of a large value straight into its
 * destination (a tensor inside a chunk, a payload after a header) without moving the rest.
 */
#define NKV_VS_OPC_FIRST 0xf0
#define NKV_VS_STORE_TTL 0xf1
#define NKV_VS_RETRIEVE_RANGE 0xf2

/*
 * Store TTL (F1h, host to controller): Store's layout (key in CDW2-3/14-15, its length and the
 * Store options in CDW11 bits 7:0 and 15:8, CDW10 = Value Size, the value in the data buffer) plus
 * CDW12 = the entry's time to live in seconds and CDW13 = flags. Served on namespaces with a cache
 * (docs/cache.md); on others it is Invalid Field (02h). CDW12: 0 = the namespace's default TTL,
 * FFFFFFFFh = never expires, else seconds from when the target received the Store. CDW13 bit 0 (NKV_TTL_PIN):
 * an explicit entry, pinned (never evicted) until it expires, counted against the namespace's pin
 * quota (81h Capacity Exceeded past it, and the value is not stored) and charged in byte-hours; a
 * pin needs a finite TTL (its own or the namespace's default: Invalid Field otherwise). CDW13 bits
 * 31:2 are reserved (Invalid Field when set). Statuses as Store. A standard Store (01h) on a cache
 * namespace is Store TTL with CDW12 = 0 and CDW13 = 0. A namespace's maximum TTL cuts longer TTLs
 * (and "never" for an entry not pinned); CQE DW0 of a successful Store TTL is the TTL the entry got
 * (seconds, FFFFFFFFh never; 0 only from older targets).
 *
 * CDW13 bit 1 (NKV_TTL_HASH): SQE bytes 23:16 (the MPTR field, which no KV command uses) hold the
 * entry's block hash, a 64-bit little-endian number: the hash the serving engine gives the KV block
 * the value holds. The target keeps it in the entry's record and names the block by it in its cache
 * events (the daemon's --events), so a KV-cache index that knows the engine's blocks by that hash
 * learns where each one is stored and when it is gone. Without bit 1, bytes 23:16 are ignored. On a
 * namespace without a cache, a Store TTL with CDW12 = 0 and CDW13 = NKV_TTL_HASH is a plain Store.
 */
#define NKV_TTL_DEFAULT 0u           /* CDW12: the namespace's default TTL */
#define NKV_TTL_NONE 0xffffffffu     /* CDW12: never expires */
#define NKV_TTL_PIN 0x1u             /* CDW13 bit 0: explicit (pinned) entry */
#define NKV_TTL_HASH 0x2u            /* CDW13 bit 1: SQE bytes 23:16 hold the block hash */

/** Build a Store TTL command (@size bytes, Store options @opts, @ttl_s, @flags NKV_TTL_*). The
 *  caller fills CID and DPTR. */
static inline NKV_HD void nkv_sqe_store_ttl(struct nkv_sqe *sqe, uint32_t nsid, const uint8_t *key, unsigned klen,
					    uint32_t size, unsigned opts, uint32_t ttl_s, uint32_t flags)
{
	nkv_sqe_kv(sqe, NKV_VS_STORE_TTL, nsid, key, klen, size, opts);
	nkv_put32(&sqe->cdw12, ttl_s);
	nkv_put32(&sqe->cdw13, flags);
}

/** Give a Store TTL command built by nkv_sqe_store_ttl() the entry's block @hash (NKV_TTL_HASH). */
static inline NKV_HD void nkv_sqe_set_block_hash(struct nkv_sqe *sqe, uint64_t hash)
{
	nkv_put32(&sqe->cdw13, nkv_get32(&sqe->cdw13) | NKV_TTL_HASH);
	nkv_put64(&sqe->mptr, hash);
}

/** Build a Retrieve Range command (HBS @size, byte @offset). The caller fills CID and DPTR. */
static inline NKV_HD void nkv_sqe_retrieve_range(struct nkv_sqe *sqe, uint32_t nsid, const uint8_t *key,
						 unsigned klen, uint32_t size, uint64_t offset)
{
	nkv_sqe_kv(sqe, NKV_VS_RETRIEVE_RANGE, nsid, key, klen, size, 0);
	nkv_put32(&sqe->cdw12, (uint32_t)offset);
	nkv_put32(&sqe->cdw13, (uint32_t)(offset >> 32));
}

/** Bytes a Retrieve Range moves: min(@hbs, @value_size - @offset); 0 when @offset >= @value_size. */
static inline NKV_HD uint32_t nkv_range_xfer(uint64_t value_size, uint64_t offset, uint32_t hbs)
{
	uint64_t left = value_size > offset ? value_size - offset : 0;
	return left < hbs ? (uint32_t)left : hbs;
}

/** List data: 4-byte NRK, then entries {u16 KL, key, pad to 4 bytes} (docs/nvme-kv-wire.md A.4). */
#define NKV_LIST_HDR 4u
static inline NKV_HD uint32_t nkv_list_entry_size(unsigned klen)
{
	return (2u + klen + 3u) & ~3u;
}

/* ---- Identify (CNS values, docs/nvme-kv-wire.md A.8) -------------------------------------------- */
#define NKV_CNS_NS 0x00
#define NKV_CNS_CTRLR 0x01
#define NKV_CNS_ACTIVE_NS 0x02
#define NKV_CNS_NS_DESC 0x03
#define NKV_CNS_CSI_NS 0x05
#define NKV_CNS_CSI_CTRLR 0x06
#define NKV_CNS_CSI_ACTIVE_NS 0x07
#define NKV_CNS_INDEP_NS 0x08
#define NKV_CNS_IOCS 0x1c
#define NKV_IDENTIFY_SIZE 4096u

/** Power state descriptor (32 bytes). */
struct nkv_psd {
	uint16_t mp;
	uint8_t rsvd2;
	uint8_t flags;
	uint32_t enlat;
	uint32_t exlat;
	uint8_t rrt, rrl, rwt, rwl;
	uint16_t idlp;
	uint8_t ips;
	uint8_t rsvd19;
	uint16_t actp;
	uint8_t apw_aps;
	uint8_t rsvd23[9];
};
NKV_SIZE(struct nkv_psd, 32);

/** Identify Controller data structure (CNS 01h), 4096 bytes. */
struct nkv_id_ctrlr {
	uint16_t vid;
	uint16_t ssvid;
	char sn[20];
	char mn[40];
	char fr[8];
	uint8_t rab;
	uint8_t ieee[3];
	uint8_t cmic;
	uint8_t mdts;
	uint16_t cntlid;
	uint32_t ver;
	uint32_t rtd3r;
	uint32_t rtd3e;
	uint32_t oaes;
	uint32_t ctratt;
	uint16_t rrls;
	uint8_t rsvd102[9];
	uint8_t cntrltype;
	uint8_t fguid[16];
	uint16_t crdt[3];
	uint8_t rsvd134[122];
	uint16_t oacs;
	uint8_t acl;
	uint8_t aerl;
	uint8_t frmw;
	uint8_t lpa;
	uint8_t elpe;
	uint8_t npss;
	uint8_t avscc;
	uint8_t apsta;
	uint16_t wctemp;
	uint16_t cctemp;
	uint16_t mtfa;
	uint32_t hmpre;
	uint32_t hmmin;
	uint8_t tnvmcap[16];
	uint8_t unvmcap[16];
	uint32_t rpmbs;
	uint16_t edstt;
	uint8_t dsto;
	uint8_t fwug;
	uint16_t kas;
	uint16_t hctma;
	uint16_t mntmt;
	uint16_t mxtmt;
	uint32_t sanicap;
	uint32_t hmminds;
	uint16_t hmmaxd;
	uint16_t nsetidmax;
	uint16_t endgidmax;
	uint8_t anatt;
	uint8_t anacap;
	uint32_t anagrpmax;
	uint32_t nanagrpid;
	uint32_t pels;
	uint16_t domainid;
	uint8_t rsvd358[10];
	uint8_t megcap[16];
	uint8_t rsvd384[128];
	uint8_t sqes;
	uint8_t cqes;
	uint16_t maxcmd;
	uint32_t nn;
	uint16_t oncs;
	uint16_t fuses;
	uint8_t fna;
	uint8_t vwc;
	uint16_t awun;
	uint16_t awupf;
	uint8_t icsvscc;
	uint8_t nwpc;
	uint16_t acwu;
	uint16_t ocfs;
	uint32_t sgls;
	uint32_t mnan;
	uint8_t maxdna[16];
	uint32_t maxcna;
	uint8_t rsvd564[204];
	char subnqn[256];
	uint8_t rsvd1024[768];
	/* NVMe over Fabrics attributes */
	uint32_t ioccsz;
	uint32_t iorcsz;
	uint16_t icdoff;
	uint8_t fcatt;
	uint8_t msdbd;
	uint16_t ofcs;
	uint8_t rsvd1806[242];
	struct nkv_psd psd[32];
	uint8_t vs[1024];
};
NKV_SIZE(struct nkv_id_ctrlr, 4096);
NKV_OFF(struct nkv_id_ctrlr, sn, 4);
NKV_OFF(struct nkv_id_ctrlr, mn, 24);
NKV_OFF(struct nkv_id_ctrlr, fr, 64);
NKV_OFF(struct nkv_id_ctrlr, cmic, 76);
NKV_OFF(struct nkv_id_ctrlr, mdts, 77);
NKV_OFF(struct nkv_id_ctrlr, cntlid, 78);
NKV_OFF(struct nkv_id_ctrlr, ver, 80);
NKV_OFF(struct nkv_id_ctrlr, oaes, 92);
NKV_OFF(struct nkv_id_ctrlr, ctratt, 96);
NKV_OFF(struct nkv_id_ctrlr, cntrltype, 111);
NKV_OFF(struct nkv_id_ctrlr, fguid, 112);
NKV_OFF(struct nkv_id_ctrlr, crdt, 128);
NKV_OFF(struct nkv_id_ctrlr, oacs, 256);
NKV_OFF(struct nkv_id_ctrlr, aerl, 259);
NKV_OFF(struct nkv_id_ctrlr, lpa, 261);
NKV_OFF(struct nkv_id_ctrlr, tnvmcap, 280);
NKV_OFF(struct nkv_id_ctrlr, kas, 320);
NKV_OFF(struct nkv_id_ctrlr, anatt, 342);
NKV_OFF(struct nkv_id_ctrlr, anacap, 343);
NKV_OFF(struct nkv_id_ctrlr, anagrpmax, 344);
NKV_OFF(struct nkv_id_ctrlr, nanagrpid, 348);
NKV_OFF(struct nkv_id_ctrlr, megcap, 368);
NKV_OFF(struct nkv_id_ctrlr, sqes, 512);
NKV_OFF(struct nkv_id_ctrlr, maxcmd, 514);
NKV_OFF(struct nkv_id_ctrlr, nn, 516);
NKV_OFF(struct nkv_id_ctrlr, oncs, 520);
NKV_OFF(struct nkv_id_ctrlr, vwc, 525);
NKV_OFF(struct nkv_id_ctrlr, sgls, 536);
NKV_OFF(struct nkv_id_ctrlr, mnan, 540);
NKV_OFF(struct nkv_id_ctrlr, subnqn, 768);
NKV_OFF(struct nkv_id_ctrlr, ioccsz, 1792);
NKV_OFF(struct nkv_id_ctrlr, iorcsz, 1796);
NKV_OFF(struct nkv_id_ctrlr, icdoff, 1800);
NKV_OFF(struct nkv_id_ctrlr, msdbd, 1803);
NKV_OFF(struct nkv_id_ctrlr, psd, 2048);
NKV_OFF(struct nkv_id_ctrlr, vs, 3072);

#define NKV_CTRATT_HOSTID_128 0x1u
#define NKV_LPA_CMD_EFFECTS 0x02u
#define NKV_LPA_EXT_DATA 0x04u  /* extended NUMD and LPO */
#define NKV_SGLS_SUPPORTED 0x1u
#define NKV_SGLS_TRANSPORT_DATA_BLOCK (1u << 21)
#define NKV_CNTRLTYPE_IO 1u

/** KV Format descriptor (16 bytes). */
struct nkv_kv_format {
	uint16_t kvkml;  /* max key length */
	uint8_t rsvd2;
	uint8_t afo;
	uint32_t kvvml;  /* max value length, bytes */
	uint32_t mnks;   /* max number of keys, 0 = not reported */
	uint8_t rsvd12[4];
};
NKV_SIZE(struct nkv_kv_format, 16);
NKV_OFF(struct nkv_kv_format, kvvml, 4);
NKV_OFF(struct nkv_kv_format, mnks, 8);

/** Identify I/O-command-set-specific namespace, KV (CNS 05h, CSI 01h), 4096 bytes. */
struct nkv_id_ns_kv {
	uint64_t nsze;   /* namespace size, bytes */
	uint8_t rsvd8[8];
	uint64_t nuse;   /* bytes used */
	uint8_t nsfeat;
	uint8_t nkvf;    /* number of KV formats, 0's based */
	uint8_t nmic;
	uint8_t rescap;
	uint8_t fpi;
	uint8_t kvfc;    /* bits 3:0: index of the format in use */
	uint8_t rsvd30[2];
	uint32_t novg;
	uint32_t anagrpid;
	uint8_t rsvd40[3];
	uint8_t nsattr;  /* bit 0: write protected */
	uint16_t nvmsetid;
	uint16_t endgid;
	uint8_t nguid[16];
	uint8_t eui64[8];
	struct nkv_kv_format kvf[16];
	uint8_t rsvd328[3512];
	uint8_t vs[256];
};
NKV_SIZE(struct nkv_id_ns_kv, 4096);
NKV_OFF(struct nkv_id_ns_kv, nuse, 16);
NKV_OFF(struct nkv_id_ns_kv, nsfeat, 24);
NKV_OFF(struct nkv_id_ns_kv, nkvf, 25);
NKV_OFF(struct nkv_id_ns_kv, nmic, 26);
NKV_OFF(struct nkv_id_ns_kv, kvfc, 29);
NKV_OFF(struct nkv_id_ns_kv, novg, 32);
NKV_OFF(struct nkv_id_ns_kv, anagrpid, 36);
NKV_OFF(struct nkv_id_ns_kv, nsattr, 43);
NKV_OFF(struct nkv_id_ns_kv, nguid, 48);
NKV_OFF(struct nkv_id_ns_kv, eui64, 64);
NKV_OFF(struct nkv_id_ns_kv, kvf, 72);
NKV_OFF(struct nkv_id_ns_kv, vs, 3840);

/**
 * Identify Namespace for the NVM command set (CNS 00h), only the leading fields rados-nkv fills.
 * For a KV namespace they carry the byte counts of the KV structure (see ctrlr.c for why).
 */
struct nkv_id_ns_nvm_head {
	uint64_t nsze;
	uint64_t ncap;
	uint64_t nuse;
	uint8_t nsfeat;
	uint8_t nlbaf;
	uint8_t flbas;
	uint8_t mc;
	uint8_t dpc;
	uint8_t dps;
	uint8_t nmic;
	uint8_t rescap;
};
NKV_SIZE(struct nkv_id_ns_nvm_head, 32);
NKV_OFF(struct nkv_id_ns_nvm_head, nuse, 16);
NKV_OFF(struct nkv_id_ns_nvm_head, nmic, 30);
#define NKV_ID_NS_NVM_NGUID 104u  /* offset of NGUID in CNS 00h */
#define NKV_ID_NS_NVM_ANAGRPID 92u /* offset of ANAGRPID in CNS 00h */
#define NKV_ID_NS_NVM_EUI64 120u  /* offset of EUI64 in CNS 00h */

/** I/O command set independent Identify Namespace (CNS 08h), 4096 bytes; leading fields only. */
struct nkv_id_ns_indep_head {
	uint8_t nsfeat;
	uint8_t nmic;
	uint8_t rescap;
	uint8_t fpi;
	uint32_t anagrpid;
	uint8_t nsattr;
	uint8_t rsvd9;
	uint16_t nvmsetid;
	uint16_t endgid;
	uint8_t nstat;   /* bit 0: namespace ready */
	uint8_t rsvd15;
};
NKV_SIZE(struct nkv_id_ns_indep_head, 16);
NKV_OFF(struct nkv_id_ns_indep_head, anagrpid, 4);
NKV_OFF(struct nkv_id_ns_indep_head, nsattr, 8);
NKV_OFF(struct nkv_id_ns_indep_head, endgid, 12);
NKV_OFF(struct nkv_id_ns_indep_head, nstat, 14);

/** Namespace identification descriptor header (CNS 03h); the value follows. */
struct nkv_ns_desc {
	uint8_t nidt;
	uint8_t nidl;
	uint8_t rsvd[2];
};
NKV_SIZE(struct nkv_ns_desc, 4);
#define NKV_NIDT_EUI64 1
#define NKV_NIDT_NGUID 2
#define NKV_NIDT_UUID 3
#define NKV_NIDT_CSI 4

/** Identify I/O Command Set data structure (CNS 1Ch): 512 command set combinations. */
#define NKV_IOCS_VECTOR_NVM (1ull << 0)
#define NKV_IOCS_VECTOR_KV (1ull << 1)
#define NKV_IOCS_VECTORS 512u

/** I/O-command-set-specific Identify Controller for KV (CNS 06h, CSI 01h): VER at bytes 3:0. */
#define NKV_KV_SPEC_VER 0x00010300u  /* KV command set spec 1.3 */

/* ---- Controller properties / registers (docs/nvme-kv-wire.md B.3) ------------------------------- */
#define NKV_REG_CAP 0x00
#define NKV_REG_VS 0x08
#define NKV_REG_INTMS 0x0c
#define NKV_REG_INTMC 0x10
#define NKV_REG_CC 0x14
#define NKV_REG_CSTS 0x1c
#define NKV_REG_NSSR 0x20
#define NKV_REG_AQA 0x24
#define NKV_REG_ASQ 0x28
#define NKV_REG_ACQ 0x30

#define NKV_CAP_MQES(c) ((uint32_t)((c) & 0xffff))
#define NKV_CAP_CQR (1ull << 16)
#define NKV_CAP_TO_SHIFT 24
#define NKV_CAP_DSTRD_SHIFT 32
#define NKV_CAP_CSS_NVM (1ull << 37)
#define NKV_CAP_CSS_IOCS (1ull << 43)
#define NKV_CAP_CSS_ADMIN_ONLY (1ull << 44)
#define NKV_CAP_MPSMIN_SHIFT 48
#define NKV_CAP_MPSMAX_SHIFT 52

#define NKV_CC_EN 0x1u
#define NKV_CC_CSS(cc) (((cc) >> 4) & 7u)
#define NKV_CC_MPS(cc) (((cc) >> 7) & 0xfu)
#define NKV_CC_AMS(cc) (((cc) >> 11) & 7u)
#define NKV_CC_SHN(cc) (((cc) >> 14) & 3u)
#define NKV_CC_IOSQES(cc) (((cc) >> 16) & 0xfu)
#define NKV_CC_IOCQES(cc) (((cc) >> 20) & 0xfu)
#define NKV_CC_CSS_NVM 0u
#define NKV_CC_CSS_IOCS 6u
#define NKV_CC_CSS_ADMIN 7u

#define NKV_CSTS_RDY 0x1u
#define NKV_CSTS_CFS 0x2u
#define NKV_CSTS_SHST_MASK 0xcu
#define NKV_CSTS_SHST_DONE 0x8u

#define NKV_VS_2_0 0x00020000u

/* ---- Log pages ---------------------------------------------------------------------------------- */
#define NKV_LID_SUPPORTED 0x00
#define NKV_LID_ERROR 0x01
#define NKV_LID_SMART 0x02
#define NKV_LID_FW_SLOT 0x03
#define NKV_LID_CHANGED_NS 0x04
/* Identify Controller OAES / Set Features 0Bh (AEC): Namespace Attribute Notices */
#define NKV_OAES_NS_ATTR (1u << 8)
/* Asynchronous Event Request completion DW0: type Notice (2h), info Namespace Attribute Changed
 * (00h), log page 04h. */
#define NKV_AEN_NS_ATTR_CHANGED (0x02u | 0x00u << 8 | (uint32_t)NKV_LID_CHANGED_NS << 16)
#define NKV_LID_CMD_EFFECTS 0x05
#define NKV_LID_ANA 0x0c
#define NKV_LID_DISCOVERY 0x70

/* Identify Controller CMIC: bit 0 more than one port, bit 1 more than one controller may attach to
 * the subsystem (what makes Linux build a multipath head), bit 3 ANA reporting. */
#define NKV_CMIC_MULTI_PORT (1u << 0)
#define NKV_CMIC_MULTI_CTRL (1u << 1)
#define NKV_CMIC_ANA (1u << 3)
/* Identify Namespace NMIC bit 0: the namespace may be attached to more than one controller. */
#define NKV_NMIC_SHARED (1u << 0)
/* Identify Controller ANACAP: states reported (bits 0-4), bit 6: ANAGRPID does not change while
 * the namespace is attached, bit 7: Namespace Management accepts a non-zero ANAGRPID. */
#define NKV_ANACAP_OPTIMIZED (1u << 0)
#define NKV_ANACAP_NON_OPTIMIZED (1u << 1)
#define NKV_ANACAP_INACCESSIBLE (1u << 2)
#define NKV_ANACAP_PERSISTENT_LOSS (1u << 3)
#define NKV_ANACAP_CHANGE (1u << 4)
#define NKV_ANACAP_GRPID_FIXED (1u << 6)
#define NKV_ANACAP_GRPID_NONZERO (1u << 7)
/* OAES / AEC bit 11: Asymmetric Namespace Access Change notices. */
#define NKV_OAES_ANA_CHANGE (1u << 11)
/* AER completion DW0: Notice (2h), info ANA Change (03h), log page 0Ch. */
#define NKV_AEN_ANA_CHANGE (0x02u | 0x03u << 8 | (uint32_t)NKV_LID_ANA << 16)
/* Get Log Page 0Ch, LSP bit 0 (RGO): return groups only, no NSID lists. */
#define NKV_ANA_LSP_RGO 0x01u

/** ANA states (the low 4 bits of a group descriptor's state byte). */
enum nkv_ana_state {
	NKV_ANA_OPTIMIZED = 0x1,
	NKV_ANA_NON_OPTIMIZED = 0x2,
	NKV_ANA_INACCESSIBLE = 0x3,
	NKV_ANA_PERSISTENT_LOSS = 0x4,
	NKV_ANA_CHANGE = 0xf,
};

/** ANA log page (0Ch) header, 16 bytes; the group descriptors follow. */
struct nkv_ana_log_hdr {
	uint64_t chgcnt;   /* change count */
	uint16_t ngrps;    /* number of ANA group descriptors */
	uint8_t rsvd10[6];
};
NKV_SIZE(struct nkv_ana_log_hdr, 16);

/** ANA group descriptor, 32 bytes; NNSIDS 32-bit NSIDs follow (none with RGO). */
struct nkv_ana_group_desc {
	uint32_t anagrpid;
	uint32_t nnsids;
	uint64_t chgcnt;
	uint8_t state;     /* bits 3:0: enum nkv_ana_state */
	uint8_t rsvd17[15];
};
NKV_SIZE(struct nkv_ana_group_desc, 32);

/** Error information log entry (64 bytes). */
struct nkv_log_error {
	uint64_t error_count;
	uint16_t sqid;
	uint16_t cid;
	uint16_t status;
	uint16_t param_loc;
	uint64_t lba;
	uint32_t nsid;
	uint8_t vs;
	uint8_t trtype;
	uint8_t rsvd30[2];
	uint64_t cs;     /* command specific information */
	uint16_t trtype_spec;
	uint8_t rsvd42[22];
};
NKV_SIZE(struct nkv_log_error, 64);

/** SMART / Health Information log (512 bytes); rados-nkv fills the counters it keeps. */
struct nkv_log_smart {
	uint8_t critical_warning;
	uint8_t temperature[2];  /* Kelvin */
	uint8_t avail_spare;
	uint8_t spare_thresh;
	uint8_t percent_used;
	uint8_t endgcws;
	uint8_t rsvd7[25];
	uint8_t data_units_read[16];    /* thousands of 512-byte units */
	uint8_t data_units_written[16];
	uint8_t host_reads[16];
	uint8_t host_writes[16];
	uint8_t ctrl_busy_time[16];
	uint8_t power_cycles[16];
	uint8_t power_on_hours[16];
	uint8_t unsafe_shutdowns[16];
	uint8_t media_errors[16];
	uint8_t num_err_log_entries[16];
	uint8_t rsvd192[320];
};
NKV_SIZE(struct nkv_log_smart, 512);
NKV_OFF(struct nkv_log_smart, data_units_read, 32);
NKV_OFF(struct nkv_log_smart, host_reads, 64);
NKV_OFF(struct nkv_log_smart, media_errors, 160);

/** Firmware slot information log (512 bytes). */
struct nkv_log_fw_slot {
	uint8_t afi;
	uint8_t rsvd1[7];
	char frs[7][8];
	uint8_t rsvd64[448];
};
NKV_SIZE(struct nkv_log_fw_slot, 512);

/** Commands Supported and Effects log (4096 bytes). */
struct nkv_log_effects {
	uint32_t acs[256];
	uint32_t iocs[256];
	uint8_t rsvd2048[2048];
};
NKV_SIZE(struct nkv_log_effects, 4096);
NKV_OFF(struct nkv_log_effects, iocs, 1024);
#define NKV_EFFECTS_CSUPP 0x1u
#define NKV_EFFECTS_LBCC 0x2u   /* changes the namespace's contents */

/* ---- Features ----------------------------------------------------------------------------------- */
#define NKV_FEAT_ARBITRATION 0x01
#define NKV_FEAT_POWER_MGMT 0x02
#define NKV_FEAT_TEMP_THRESH 0x04
#define NKV_FEAT_ERROR_RECOVERY 0x05
#define NKV_FEAT_VWC 0x06
#define NKV_FEAT_NUM_QUEUES 0x07
#define NKV_FEAT_ASYNC_EVENT 0x0b
#define NKV_FEAT_KATO 0x0f
#define NKV_FEAT_IOCS_PROFILE 0x19
#define NKV_FEAT_KV_CONFIG 0x20
#define NKV_FEAT_HOST_ID 0x81

#define NKV_FEAT_SEL_CURRENT 0
#define NKV_FEAT_SEL_DEFAULT 1
#define NKV_FEAT_SEL_SAVED 2
#define NKV_FEAT_SEL_CAPS 3
#define NKV_FEAT_CAP_CHANGEABLE 0x4u

/** Feature 20h (Key Value Configuration) bit 0: error on delete of a non-existent key. */
#define NKV_KV_CONFIG_EDNEK 0x1u


/* ---- NVMe over Fabrics (docs/nvme-kv-wire.md C.1, C.2, C.10) ------------------------------------ */
#define NKV_FCTYPE_PROP_SET 0x00
#define NKV_FCTYPE_CONNECT 0x01
#define NKV_FCTYPE_PROP_GET 0x04
#define NKV_FCTYPE_AUTH_SEND 0x05
#define NKV_FCTYPE_AUTH_RECV 0x06
#define NKV_FCTYPE_DISCONNECT 0x08

/* Fabrics command specific status (SCT 1), beyond the Connect ones above */
#define NKV_SC_INCOMPATIBLE_FORMAT 0x80
#define NKV_SC_CONTROLLER_BUSY 0x81
#define NKV_SC_INVALID_QUEUE_TYPE 0x85

#define NKV_DISCOVERY_NQN "nqn.2014-08.org.nvmexpress.discovery"
#define NKV_CNTRLTYPE_DISCOVERY 2u
#define NKV_CNTLID_DYNAMIC 0xffffu
#define NKV_CNTLID_MAX 0xffefu

/** Fabrics command SQE view (opcode 7Fh): FCTYPE in byte 4, the rest command specific. */
struct nkv_fabrics_cmd {
	uint8_t opc;       /* 7Fh */
	uint8_t flags;     /* PSDT must be 01b */
	uint16_t cid;
	uint8_t fctype;
	uint8_t rsvd5[19];
	uint8_t sgl1[16];
	/* Connect: 41:40 RECFMT, 43:42 QID, 45:44 SQSIZE, 46 CATTR, 51:48 KATO.
	 * Property Get/Set: 40 ATTRIB (size), 47:44 OFST, 55:48 VALUE. */
	uint8_t spec[24];
};
NKV_SIZE(struct nkv_fabrics_cmd, 64);
NKV_OFF(struct nkv_fabrics_cmd, fctype, 4);
NKV_OFF(struct nkv_fabrics_cmd, sgl1, 24);
NKV_OFF(struct nkv_fabrics_cmd, spec, 40);
#define NKV_CONNECT_CATTR_DISABLE_SQFC 0x4u

/** Connect command data (1024 bytes). */
struct nkv_connect_data {
	uint8_t hostid[16];
	uint16_t cntlid;
	uint8_t rsvd18[238];
	char subnqn[256];
	char hostnqn[256];
	uint8_t rsvd768[256];
};
NKV_SIZE(struct nkv_connect_data, 1024);
NKV_OFF(struct nkv_connect_data, cntlid, 16);
NKV_OFF(struct nkv_connect_data, subnqn, 256);
NKV_OFF(struct nkv_connect_data, hostnqn, 512);

/* ---- In-band authentication, DH-HMAC-CHAP (base spec 2.0 8.13; docs/nvme-kv-wire.md C.12) -------
 * Connect response DW0 bits 17 (ATR: an authentication transaction is required on this queue) and
 * 18 (ASCR: secure channel concatenation required). Authentication Send (05h, host to controller,
 * TL bytes) and Receive (06h, controller to host, AL bytes) carry the messages below; their SQE:
 * byte 41 SPSP0, 42 SPSP1 (both 01h), 43 SECP (E9h), 47:44 TL / AL. */
#define NKV_CONNECT_AUTHREQ_ATR (1u << 17)
#define NKV_CONNECT_AUTHREQ_ASCR (1u << 18)
#define NKV_SC_AUTH_REQUIRED 0x91 /* SCT 1: the queue has not authenticated (DNR) */
#define NKV_AUTH_SQE_SPSP0 41
#define NKV_AUTH_SQE_SPSP1 42
#define NKV_AUTH_SQE_SECP 43
#define NKV_AUTH_SQE_LEN 44
#define NKV_AUTH_SECP 0xe9u /* NVMe in-band authentication */
#define NKV_AUTH_SPSP 0x01u
/* AUTH_TYPE and AUTH_ID of each message */
#define NKV_AUTH_TYPE_COMMON 0x00
#define NKV_AUTH_TYPE_DHCHAP 0x01
#define NKV_AUTH_ID_NEGOTIATE 0x00 /* common */
#define NKV_AUTH_ID_CHALLENGE 0x01
#define NKV_AUTH_ID_REPLY 0x02
#define NKV_AUTH_ID_SUCCESS1 0x03
#define NKV_AUTH_ID_SUCCESS2 0x04
#define NKV_AUTH_ID_FAILURE2 0xf0 /* common */
#define NKV_AUTH_ID_FAILURE1 0xf1 /* common */
#define NKV_AUTH_PROTO_DHCHAP 0x01 /* AUTHID of a DH-HMAC-CHAP protocol descriptor */
/* AUTH_Failure: reason code 01h (authentication failure) and its explanations */
#define NKV_AUTH_RC_FAILURE 0x01
#define NKV_AUTH_RCE_FAILED 0x01            /* the host or the controller did not authenticate */
#define NKV_AUTH_RCE_PROTOCOL_UNUSABLE 0x02 /* no protocol descriptor the controller can use */
#define NKV_AUTH_RCE_CONCAT_MISMATCH 0x03   /* SC_C not acceptable */
#define NKV_AUTH_RCE_HASH_UNUSABLE 0x04     /* no acceptable hash function offered */
#define NKV_AUTH_RCE_DHGROUP_UNUSABLE 0x05  /* no acceptable DH group offered */
#define NKV_AUTH_RCE_INCORRECT_PAYLOAD 0x06 /* a message's payload is wrong */
#define NKV_AUTH_RCE_INCORRECT_MESSAGE 0x07 /* not the message the protocol expects next */

/** AUTH_Negotiate (8 bytes, then NAPD protocol descriptors). */
struct nkv_auth_negotiate {
	uint8_t auth_type, auth_id; /* 00h, 00h */
	uint16_t rsvd2;
	uint16_t t_id;              /* transaction identifier, echoed by every later message */
	uint8_t sc_c;               /* secure channel concatenation: 0 = none */
	uint8_t napd;               /* number of protocol descriptors */
};
NKV_SIZE(struct nkv_auth_negotiate, 8);
/** A DH-HMAC-CHAP protocol descriptor: HashIDList in idlist[0..29], DHgIDList in idlist[30..59]. */
struct nkv_auth_proto_desc {
	uint8_t authid; /* 01h */
	uint8_t rsvd1;
	uint8_t halen, dhlen;
	uint8_t idlist[60];
};
NKV_SIZE(struct nkv_auth_proto_desc, 64);
/** DH-HMAC-CHAP_Challenge (16 bytes, then C1 of HL bytes, then DHVLEN bytes of the DH value). */
struct nkv_auth_challenge {
	uint8_t auth_type, auth_id; /* 01h, 01h */
	uint16_t rsvd2;
	uint16_t t_id;
	uint8_t hl, rsvd7;
	uint8_t hashid, dhgid;
	uint16_t dhvlen;
	uint32_t seqnum;            /* S1 */
};
NKV_SIZE(struct nkv_auth_challenge, 16);
NKV_OFF(struct nkv_auth_challenge, dhvlen, 10);
/** DH-HMAC-CHAP_Reply (16 bytes, then R1 (HL), C2 (HL; zeros unless CVALID), the DH value). */
struct nkv_auth_reply {
	uint8_t auth_type, auth_id; /* 01h, 02h */
	uint16_t rsvd2;
	uint16_t t_id;
	uint8_t hl, rsvd7;
	uint8_t cvalid, rsvd9;      /* CVALID bit 0: C2 carried (bidirectional when SEQNUM != 0) */
	uint16_t dhvlen;
	uint32_t seqnum;            /* S2 */
};
NKV_SIZE(struct nkv_auth_reply, 16);
/** DH-HMAC-CHAP_Success1 (16 bytes, then R2 of HL bytes when RVALID). */
struct nkv_auth_success1 {
	uint8_t auth_type, auth_id; /* 01h, 03h */
	uint16_t rsvd2;
	uint16_t t_id;
	uint8_t hl, rsvd7;
	uint8_t rvalid;             /* bit 0: R2 carried */
	uint8_t rsvd9[7];
};
NKV_SIZE(struct nkv_auth_success1, 16);
/** DH-HMAC-CHAP_Success2 (16 bytes). */
struct nkv_auth_success2 {
	uint8_t auth_type, auth_id; /* 01h, 04h */
	uint16_t rsvd2;
	uint16_t t_id;
	uint8_t rsvd6[10];
};
NKV_SIZE(struct nkv_auth_success2, 16);
/** AUTH_Failure1 (controller) / AUTH_Failure2 (host), 8 bytes. */
struct nkv_auth_failure {
	uint8_t auth_type, auth_id; /* 00h, F1h / F0h */
	uint16_t rsvd2;
	uint16_t t_id;
	uint8_t rescode, rescode_exp;
};
NKV_SIZE(struct nkv_auth_failure, 8);

/** Discovery log page (LID 70h) header, 1024 bytes; entries follow at byte 1024. */
struct nkv_disc_log_hdr {
	uint64_t genctr;
	uint64_t numrec;
	uint16_t recfmt;
	uint8_t dlpf;
	uint8_t rsvd19;
	uint32_t tdlpl;
	uint8_t rsvd24[1000];
};
NKV_SIZE(struct nkv_disc_log_hdr, 1024);
NKV_OFF(struct nkv_disc_log_hdr, numrec, 8);
NKV_OFF(struct nkv_disc_log_hdr, tdlpl, 20);

/** Discovery log page entry, 1024 bytes. */
struct nkv_disc_log_entry {
	uint8_t trtype;     /* 3 = TCP */
	uint8_t adrfam;     /* 1 = IPv4, 2 = IPv6 */
	uint8_t subtype;    /* 2 = NVM subsystem, 3 = current discovery subsystem */
	uint8_t treq;       /* bits 1:0 secure channel; bit 2 SQ flow control disable supported */
	uint16_t portid;
	uint16_t cntlid;    /* FFFFh: dynamic */
	uint16_t asqsz;
	uint16_t eflags;
	uint8_t rsvd12[20];
	char trsvcid[32];   /* ASCII, space padded */
	uint8_t rsvd64[192];
	char subnqn[256];
	char traddr[256];   /* ASCII, space padded */
	uint8_t tsas[256];  /* TCP: byte 0 SECTYPE */
};
NKV_SIZE(struct nkv_disc_log_entry, 1024);
NKV_OFF(struct nkv_disc_log_entry, asqsz, 8);
NKV_OFF(struct nkv_disc_log_entry, trsvcid, 32);
NKV_OFF(struct nkv_disc_log_entry, subnqn, 256);
NKV_OFF(struct nkv_disc_log_entry, traddr, 512);
NKV_OFF(struct nkv_disc_log_entry, tsas, 768);
#define NKV_LID_DISCOVERY 0x70
#define NKV_TRTYPE_TCP 3
#define NKV_ADRFAM_IPV4 1
#define NKV_ADRFAM_IPV6 2
#define NKV_SUBTYPE_NVME 2
#define NKV_SUBTYPE_CURRENT_DISCOVERY 3
#define NKV_TREQ_NOT_SPECIFIED 0x0u /* a port without a secure channel (as Linux nvmet's) */
#define NKV_TREQ_REQUIRED 0x1u      /* a secure channel (TLS) is required */
#define NKV_TREQ_NOT_REQUIRED 0x2u /* TLS offered, plain allowed (some hosts then try TLS) */
#define NKV_TREQ_DISABLE_SQFC 0x4u
#define NKV_TCP_SECTYPE_NONE 0   /* TSAS byte 0 for TCP */
#define NKV_TCP_SECTYPE_TLS12 1
#define NKV_TCP_SECTYPE_TLS13 2
#define NKV_EFLAGS_DUPRETINFO 0x1u
#define NKV_EFLAGS_EPCSD 0x2u

/* ---- NVMe/TCP PDUs (docs/nvme-kv-wire.md C.3-C.9) ------------------------------------------------ */
#define NKV_TCP_PDU_ICREQ 0x00
#define NKV_TCP_PDU_ICRESP 0x01
#define NKV_TCP_PDU_H2C_TERM 0x02
#define NKV_TCP_PDU_C2H_TERM 0x03
#define NKV_TCP_PDU_CMD 0x04
#define NKV_TCP_PDU_RSP 0x05
#define NKV_TCP_PDU_H2C_DATA 0x06
#define NKV_TCP_PDU_C2H_DATA 0x07
#define NKV_TCP_PDU_R2T 0x09

#define NKV_TCP_F_HDGST 0x01
#define NKV_TCP_F_DDGST 0x02
#define NKV_TCP_F_LAST 0x04
#define NKV_TCP_F_SUCCESS 0x08

#define NKV_TCP_DGST_HDR 0x01 /* ICReq/ICResp DGST bits */
#define NKV_TCP_DGST_DATA 0x02

/* Fatal error status of a termination PDU */
#define NKV_TCP_FES_INVALID_HEADER 0x01
#define NKV_TCP_FES_PDU_SEQUENCE 0x02
#define NKV_TCP_FES_HDGST 0x03
#define NKV_TCP_FES_DATA_OUT_OF_RANGE 0x04
#define NKV_TCP_FES_DATA_LIMIT 0x05
#define NKV_TCP_FES_UNSUPPORTED_PARAM 0x06

#define NKV_TCP_PORT 4420
#define NKV_TCP_DISC_PORT 8009
#define NKV_TCP_MIN_MAXH2CDATA 4096u
#define NKV_TCP_TERM_MAX_PLEN 152u
#define NKV_TCP_ADMIN_ICD 8192u /* in-capsule data on the admin queue (and Connect) */

/** Common header of every PDU. */
struct nkv_tcp_ch {
	uint8_t type;
	uint8_t flags;
	uint8_t hlen;
	uint8_t pdo;
	uint32_t plen;
};
NKV_SIZE(struct nkv_tcp_ch, 8);

/** ICReq (host) and ICResp (controller), 128 bytes. */
struct nkv_tcp_ic {
	struct nkv_tcp_ch ch;
	uint16_t pfv;
	uint8_t pda;      /* ICReq: HPDA; ICResp: CPDA */
	uint8_t dgst;
	uint32_t maxr2t_or_maxh2cdata; /* ICReq: MAXR2T (0's based); ICResp: MAXH2CDATA */
	uint8_t rsvd16[112];
};
NKV_SIZE(struct nkv_tcp_ic, 128);
NKV_OFF(struct nkv_tcp_ic, pda, 10);
NKV_OFF(struct nkv_tcp_ic, maxr2t_or_maxh2cdata, 12);

/** H2CTermReq / C2HTermReq header, 24 bytes; the offending header follows. */
struct nkv_tcp_term {
	struct nkv_tcp_ch ch;
	uint16_t fes;
	uint8_t fei[4];
	uint8_t rsvd14[10];
};
NKV_SIZE(struct nkv_tcp_term, 24);
NKV_OFF(struct nkv_tcp_term, fei, 10);

/** CapsuleCmd header, 72 bytes. */
struct nkv_tcp_cmd {
	struct nkv_tcp_ch ch;
	struct nkv_sqe sqe;
};
NKV_SIZE(struct nkv_tcp_cmd, 72);

/** CapsuleResp, 24 bytes. */
struct nkv_tcp_rsp {
	struct nkv_tcp_ch ch;
	struct nkv_cqe cqe;
};
NKV_SIZE(struct nkv_tcp_rsp, 24);

/** H2CData, C2HData and R2T share one 24-byte layout (TTAG is reserved in C2HData). */
struct nkv_tcp_data {
	struct nkv_tcp_ch ch;
	uint16_t cccid;
	uint16_t ttag;
	uint32_t datao;   /* R2T: R2TO */
	uint32_t datal;   /* R2T: R2TL */
	uint32_t rsvd20;
};
NKV_SIZE(struct nkv_tcp_data, 24);
NKV_OFF(struct nkv_tcp_data, datao, 12);
NKV_OFF(struct nkv_tcp_data, datal, 16);

/* SGL descriptor type byte (byte 15) values used over TCP (docs/nvme-kv-wire.md C.5) */
#define NKV_SGL_DATA_BLOCK_OFFSET 0x01      /* in-capsule data: type 0, subtype 1 */
#define NKV_SGL_TRANSPORT_DATA_BLOCK 0x5a  /* type 5, subtype Ah */

#ifdef __cplusplus
}
#endif
#endif /* NKV_SPEC_H */
