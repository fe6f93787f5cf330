/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kv.c - the KV command helpers of libnkv (Store, Store TTL, Retrieve, Retrieve Range, Delete, Exist,
 * List, vendor Exec), the List data walker, and the NVMe status -> errno/name tables
 * (docs/nvme-kv-wire.md A.2-A.6, A.9; Store TTL: nkv_spec.h, docs/cache.md).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "client/internal.h"

static int check_key(const void *key, unsigned klen, bool may_be_empty)
{
	if (klen > NKV_KEY_MAX || (klen && !key) || (!klen && !may_be_empty))
		return -EINVAL;
	return 0;
}

/* ---- asynchronous ------------------------------------------------------------------------------ */

int nkv_store_async(struct nkv_qpair *qp, uint32_t nsid, const void *key, unsigned klen, const void *val,
		    uint32_t len, unsigned opts, nkv_cb cb, void *arg)
{
	struct nkv_sqe sqe;
	if (check_key(key, klen, false) || (len && !val))
		return -EINVAL;
	nkv_sqe_kv(&sqe, NKV_KV_STORE, nsid, key, klen, len, opts);
	/* The engine only reads host-to-controller buffers: dropping const is safe. */
	return nkv_submit(qp, &sqe, (void *)val, len, cb, arg);
}

/*
 * Build a Store TTL (F1h). Same checks as Store; the TTL itself is the target's to judge (a pin needs a
 * finite one, max_ttl cuts it), so any 32-bit value goes: only the namespace knows its default.
 */
static int store_ttl_prep(struct nkv_sqe *sqe, uint32_t nsid, const void *key, unsigned klen, const void *val,
			  uint32_t len, unsigned opts, uint32_t ttl_s, bool pin)
{
	if (check_key(key, klen, false) || (len && !val))
		return -EINVAL;
	nkv_sqe_store_ttl(sqe, nsid, key, klen, len, opts, ttl_s, pin ? NKV_TTL_PIN : 0);
	return 0;
}

int nkv_store_ttl_async(struct nkv_qpair *qp, uint32_t nsid, const void *key, unsigned klen, const void *val,
			uint32_t len, unsigned opts, uint32_t ttl_s, bool pin, nkv_cb cb, void *arg)
{
	struct nkv_sqe sqe;
	int rc = store_ttl_prep(&sqe, nsid, key, klen, val, len, opts, ttl_s, pin);
	if (rc)
		return rc;
	/* Store's data path: the engines only read host-to-controller buffers (F1h is 01b). */
	return nkv_submit(qp, &sqe, (void *)val, len, cb, arg);
}

int nkv_retrieve_async(struct nkv_qpair *qp, uint32_t nsid, const void *key, unsigned klen, void *buf,
		       uint32_t len, nkv_cb cb, void *arg)
{
	struct nkv_sqe sqe;
	if (check_key(key, klen, false) || (len && !buf))
		return -EINVAL;
	nkv_sqe_kv(&sqe, NKV_KV_RETRIEVE, nsid, key, klen, len, 0);
	return nkv_submit(qp, &sqe, buf, len, cb, arg);
}

int nkv_retrieve_range_async(struct nkv_qpair *qp, uint32_t nsid, const void *key, unsigned klen, uint64_t offset,
			     void *buf, uint32_t len, nkv_cb cb, void *arg)
{
	struct nkv_sqe sqe;
	if (check_key(key, klen, false) || (len && !buf))
		return -EINVAL;
	nkv_sqe_retrieve_range(&sqe, nsid, key, klen, len, offset);
	return nkv_submit(qp, &sqe, buf, len, cb, arg);
}

/* Delete and Exist: a key, no data. */
static int key_only_async(struct nkv_qpair *qp, uint8_t opc, uint32_t nsid, const void *key, unsigned klen,
			  nkv_cb cb, void *arg)
{
	struct nkv_sqe sqe;
	if (check_key(key, klen, false))
		return -EINVAL;
	nkv_sqe_kv(&sqe, opc, nsid, key, klen, 0, 0);
	return nkv_submit(qp, &sqe, NULL, 0, cb, arg);
}

int nkv_delete_async(struct nkv_qpair *qp, uint32_t nsid, const void *key, unsigned klen, nkv_cb cb, void *arg)
{
	return key_only_async(qp, NKV_KV_DELETE, nsid, key, klen, cb, arg);
}

int nkv_exist_async(struct nkv_qpair *qp, uint32_t nsid, const void *key, unsigned klen, nkv_cb cb, void *arg)
{
	return key_only_async(qp, NKV_KV_EXIST, nsid, key, klen, cb, arg);
}

/*
 * Check a vendor Exec's arguments and build its SQE; *@buf and *@blen get the one data buffer the
 * opcode's direction moves. Refusing a buffer the direction does not use (rather than ignoring it)
 * catches a caller who picked the wrong opcode before the target sees the command.
 */
static int exec_prep(struct nkv_sqe *sqe, uint32_t nsid, const void *key, unsigned klen, uint8_t opc,
		     const void *in, uint32_t in_len, void *out, uint32_t out_len, void **buf, uint32_t *blen)
{
	/* F0h-FFh are built-in vendor commands with layouts of their own: never an Exec */
	if (check_key(key, klen, false) || opc < NKV_EXEC_OPC_FIRST || opc >= NKV_VS_OPC_FIRST || (in_len && !in) ||
	    (out_len && !out))
		return -EINVAL;
	switch (nkv_opc_xfer(opc)) {
	case NKV_XFER_H2C: /* @in is the host buffer; CDW10 = its size, no inline bytes */
		if (out_len)
			return -EINVAL;
		nkv_sqe_exec(sqe, opc, nsid, key, klen, in_len, NULL, 0);
		/* The engines only read host-to-controller buffers: dropping const is safe. */
		*buf = (void *)in;
		*blen = in_len;
		return 0;
	case NKV_XFER_NONE: /* as 10b without a buffer: @in inline, CDW10 0 */
	case NKV_XFER_C2H:  /* @in inline; @out is the host buffer, CDW10 = its size */
		if (in_len > NKV_EXEC_INLINE_MAX || (nkv_opc_xfer(opc) == NKV_XFER_NONE && out_len))
			return -EINVAL;
		nkv_sqe_exec(sqe, opc, nsid, key, klen, out_len, in, in_len);
		*buf = out;
		*blen = out_len;
		return 0;
	default: /* 11b: one NVMe data pointer cannot move data both ways; never allowlisted */
		return -EINVAL;
	}
}

int nkv_vendor_exec_async(struct nkv_qpair *qp, uint32_t nsid, const void *key, unsigned klen, uint8_t opc,
			  const void *in, uint32_t in_len, void *out, uint32_t out_len, nkv_cb cb, void *arg)
{
	struct nkv_sqe sqe;
	void *buf = NULL;
	uint32_t blen = 0;
	int rc = exec_prep(&sqe, nsid, key, klen, opc, in, in_len, out, out_len, &buf, &blen);
	if (rc)
		return rc;
	return nkv_submit(qp, &sqe, buf, blen, cb, arg);
}

/* ---- synchronous ------------------------------------------------------------------------------- */

int nkv_store(struct nkv_qpair *qp, uint32_t nsid, const void *key, unsigned klen, const void *val,
	      uint32_t len, unsigned opts, struct nkv_cpl *cpl)
{
	struct nkv_sqe sqe;
	if (check_key(key, klen, false) || (len && !val))
		return -EINVAL;
	nkv_sqe_kv(&sqe, NKV_KV_STORE, nsid, key, klen, len, opts);
	return nkv_exec(qp, &sqe, (void *)val, len, cpl);
}

int nkv_store_ttl(struct nkv_qpair *qp, uint32_t nsid, const void *key, unsigned klen, const void *val,
		  uint32_t len, unsigned opts, uint32_t ttl_s, bool pin, struct nkv_cpl *cpl)
{
	struct nkv_sqe sqe;
	int rc = store_ttl_prep(&sqe, nsid, key, klen, val, len, opts, ttl_s, pin);
	if (rc)
		return rc;
	return nkv_exec(qp, &sqe, (void *)val, len, cpl);
}

int nkv_retrieve(struct nkv_qpair *qp, uint32_t nsid, const void *key, unsigned klen, void *buf, uint32_t len,
		 uint32_t *value_size, struct nkv_cpl *cpl)
{
	struct nkv_sqe sqe;
	struct nkv_cpl c = {0};
	if (check_key(key, klen, false) || (len && !buf))
		return -EINVAL;
	nkv_sqe_kv(&sqe, NKV_KV_RETRIEVE, nsid, key, klen, len, 0);
	int rc = nkv_exec(qp, &sqe, buf, len, &c);
	if (rc == 0 && value_size)
		*value_size = c.dw0;
	if (cpl)
		*cpl = c;
	return rc;
}

int nkv_retrieve_range(struct nkv_qpair *qp, uint32_t nsid, const void *key, unsigned klen, uint64_t offset,
		       void *buf, uint32_t len, uint32_t *xfer, uint32_t *value_size, struct nkv_cpl *cpl)
{
	struct nkv_sqe sqe;
	struct nkv_cpl c = {0};
	if (check_key(key, klen, false) || (len && !buf))
		return -EINVAL;
	nkv_sqe_retrieve_range(&sqe, nsid, key, klen, len, offset);
	int rc = nkv_exec(qp, &sqe, buf, len, &c);
	if (rc == 0 && value_size)
		*value_size = c.dw0;
	if (rc == 0 && xfer)
		*xfer = c.xfer;
	if (cpl)
		*cpl = c;
	return rc;
}

int nkv_vendor_exec(struct nkv_qpair *qp, uint32_t nsid, const void *key, unsigned klen, uint8_t opc,
		    const void *in, uint32_t in_len, void *out, uint32_t out_len, uint32_t *out_size,
		    struct nkv_cpl *cpl)
{
	struct nkv_sqe sqe;
	struct nkv_cpl c = {0};
	void *buf = NULL;
	uint32_t blen = 0;
	int rc = exec_prep(&sqe, nsid, key, klen, opc, in, in_len, out, out_len, &buf, &blen);
	if (rc)
		return rc;
	rc = nkv_exec(qp, &sqe, buf, blen, &c); /* errno from nkv_cpl_errno(): C1h gives the method's */
	if (rc == 0 && out_size)
		*out_size = c.dw0;
	if (cpl)
		*cpl = c;
	return rc;
}

int nkv_delete(struct nkv_qpair *qp, uint32_t nsid, const void *key, unsigned klen, struct nkv_cpl *cpl)
{
	struct nkv_sqe sqe;
	if (check_key(key, klen, false))
		return -EINVAL;
	nkv_sqe_kv(&sqe, NKV_KV_DELETE, nsid, key, klen, 0, 0);
	return nkv_exec(qp, &sqe, NULL, 0, cpl);
}

int nkv_exist(struct nkv_qpair *qp, uint32_t nsid, const void *key, unsigned klen, struct nkv_cpl *cpl)
{
	struct nkv_sqe sqe;
	if (check_key(key, klen, false))
		return -EINVAL;
	nkv_sqe_kv(&sqe, NKV_KV_EXIST, nsid, key, klen, 0, 0);
	return nkv_exec(qp, &sqe, NULL, 0, cpl);
}

int nkv_list(struct nkv_qpair *qp, uint32_t nsid, const void *key, unsigned klen, void *buf, uint32_t len,
	     struct nkv_cpl *cpl)
{
	struct nkv_sqe sqe;
	if (check_key(key, klen, true) || len < NKV_LIST_HDR || !buf)
		return -EINVAL;
	nkv_sqe_kv(&sqe, NKV_KV_LIST, nsid, key, klen, len, 0);
	return nkv_exec(qp, &sqe, buf, len, cpl);
}

/*
 * The cursor keeps the byte offset of the next entry in bits 31:0 and the number of entries
 * already returned in bits 63:32, so the walk stops after NRK entries whatever follows them.
 */
int nkv_list_next(const void *buf, uint32_t len, uint64_t *pos, uint8_t key[16], unsigned *klen)
{
	const uint8_t *b = buf;
	if (!buf || !pos || len < NKV_LIST_HDR)
		return -EPROTO;
	uint32_t nrk = nkv_get32(b), off = (uint32_t)*pos, idx = (uint32_t)(*pos >> 32);
	if (off == 0)
		off = NKV_LIST_HDR;
	if (idx >= nrk)
		return 0;
	if (off > len || len - off < 2)
		return -EPROTO;
	unsigned kl = nkv_get16(b + off);
	if (kl == 0 || kl > NKV_KEY_MAX || nkv_list_entry_size(kl) > len - off)
		return -EPROTO;
	memcpy(key, b + off + 2, kl);
	*klen = kl;
	off += nkv_list_entry_size(kl);
	*pos = (uint64_t)(idx + 1) << 32 | off;
	return 1;
}

/* ---- status helpers ---------------------------------------------------------------------------- */

struct status_info {
	uint16_t code; /* SCT << 8 | SC */
	int err;       /* positive errno */
	const char *name;
};

/*
 * KV codes appear with SCT 0 (the spec, SPDK, libnvme; this project's target) and, from some
 * emulators, with SCT 1 (docs/nvme-kv-wire.md A.6): both map the same. SCT 1 80h-85h are also the Fabrics
 * Connect codes; nkv_connect() decodes those itself (ctrl.c connect_errno), so here they keep
 * their KV meaning except 84h, which only Connect uses in practice.
 */
static const struct status_info g_status[] = {
	{0x000, 0, "Success (SCT 0h SC 00h)"},
	{0x001, EOPNOTSUPP, "Invalid Command Opcode (SCT 0h SC 01h)"},
	{0x002, EINVAL, "Invalid Field in Command (SCT 0h SC 02h)"},
	{0x003, EPROTO, "Command ID Conflict (SCT 0h SC 03h)"},
	{0x004, EIO, "Data Transfer Error (SCT 0h SC 04h)"},
	{0x005, EIO, "Commands Aborted due to Power Loss (SCT 0h SC 05h)"},
	{0x006, EIO, "Internal Error (SCT 0h SC 06h)"},
	{0x007, ECANCELED, "Command Abort Requested (SCT 0h SC 07h)"},
	{0x008, ECANCELED, "Command Aborted due to SQ Deletion (SCT 0h SC 08h)"},
	{0x00b, ENXIO, "Invalid Namespace or Format (SCT 0h SC 0Bh)"},
	{0x00c, EPROTO, "Command Sequence Error (SCT 0h SC 0Ch)"},
	{0x00d, EINVAL, "Invalid SGL Segment Descriptor (SCT 0h SC 0Dh)"},
	{0x00e, EINVAL, "Invalid Number of SGL Descriptors (SCT 0h SC 0Eh)"},
	{0x00f, EINVAL, "Data SGL Length Invalid (SCT 0h SC 0Fh)"},
	{0x011, EINVAL, "SGL Descriptor Type Invalid (SCT 0h SC 11h)"},
	{0x016, EINVAL, "SGL Offset Invalid (SCT 0h SC 16h)"},
	{0x018, EINVAL, "Host Identifier Inconsistent Format (SCT 0h SC 18h)"},
	{0x019, ETIMEDOUT, "Keep Alive Timer Expired (SCT 0h SC 19h)"},
	{0x01a, EINVAL, "Keep Alive Timeout Invalid (SCT 0h SC 1Ah)"},
	{0x020, EROFS, "Namespace is Write Protected (SCT 0h SC 20h)"},
	{0x021, EAGAIN, "Command Interrupted (SCT 0h SC 21h)"},
	{0x022, EAGAIN, "Transient Transport Error (SCT 0h SC 22h)"},
	{0x081, ENOSPC, "Capacity Exceeded (SCT 0h SC 81h)"},
	{0x082, EAGAIN, "Namespace Not Ready (SCT 0h SC 82h)"},
	{0x083, EBUSY, "Reservation Conflict (SCT 0h SC 83h)"},
	{0x084, EBUSY, "Format In Progress (SCT 0h SC 84h)"},
	{0x085, EFBIG, "Invalid Value Size (SCT 0h SC 85h)"},
	{0x086, EINVAL, "Invalid Key Size (SCT 0h SC 86h)"},
	{0x087, ENOENT, "Key Does Not Exist (SCT 0h SC 87h)"},
	{0x088, EIO, "Unrecovered Error (SCT 0h SC 88h)"},
	{0x089, EEXIST, "Key Exists (SCT 0h SC 89h)"},
	/* rados-nkv vendor Exec (nkv_spec.h); C1h's real errno is in DW0 (nkv_cpl_errno) */
	{0x0c0, EOPNOTSUPP, "Class or Method Not Available (SCT 0h SC C0h)"},
	{0x0c1, EIO, "Method Failed (SCT 0h SC C1h)"},
	{0x101, EINVAL, "Invalid Queue Identifier (SCT 1h SC 01h)"},
	{0x102, EINVAL, "Invalid Queue Size (SCT 1h SC 02h)"},
	{0x105, EBUSY, "Asynchronous Event Request Limit Exceeded (SCT 1h SC 05h)"},
	{0x109, EINVAL, "Invalid Log Page (SCT 1h SC 09h)"},
	{0x10d, EINVAL, "Feature Identifier Not Saveable (SCT 1h SC 0Dh)"},
	{0x10e, EPERM, "Feature Not Changeable (SCT 1h SC 0Eh)"},
	{0x129, EOPNOTSUPP, "I/O Command Set Not Supported (SCT 1h SC 29h)"},
	{0x12a, EOPNOTSUPP, "I/O Command Set Not Enabled (SCT 1h SC 2Ah)"},
	{0x12b, EOPNOTSUPP, "I/O Command Set Combination Rejected (SCT 1h SC 2Bh)"},
	{0x12c, EOPNOTSUPP, "Invalid I/O Command Set (SCT 1h SC 2Ch)"},
	{0x180, EPROTO, "Incompatible Format (SCT 1h SC 80h)"},
	{0x181, ENOSPC, "Capacity Exceeded / Controller Busy (SCT 1h SC 81h)"},
	{0x182, EAGAIN, "Namespace Not Ready / Connect Invalid Parameters (SCT 1h SC 82h)"},
	{0x183, EBUSY, "Reservation Conflict / Connect Restart Discovery (SCT 1h SC 83h)"},
	{0x184, EACCES, "Connect Invalid Host (SCT 1h SC 84h)"},
	{0x185, EFBIG, "Invalid Value Size (SCT 1h SC 85h)"},
	{0x186, EINVAL, "Invalid Key Size (SCT 1h SC 86h)"},
	{0x187, ENOENT, "Key Does Not Exist (SCT 1h SC 87h)"},
	{0x188, EIO, "Unrecovered Error (SCT 1h SC 88h)"},
	{0x189, EEXIST, "Key Exists (SCT 1h SC 89h)"},
	{0x191, EACCES, "Authentication Required (SCT 1h SC 91h)"},
	{0x281, EIO, "Unrecovered Read Error (SCT 2h SC 81h)"},
	{0x300, EIO, "Internal Path Error (SCT 3h SC 00h)"},
	/* ANA: the path (gateway) is drained or lost for this namespace; another path may serve it */
	{0x301, ENOTCONN, "Asymmetric Access Persistent Loss (SCT 3h SC 01h)"},
	{0x302, ENOTCONN, "Asymmetric Access Inaccessible (SCT 3h SC 02h)"},
	{0x303, ENOTCONN, "Asymmetric Access Transition (SCT 3h SC 03h)"},
	{0x360, ENOTCONN, "Controller Pathing Error (SCT 3h SC 60h)"},
	{0x370, ENOTCONN, "Host Pathing Error: connection lost (SCT 3h SC 70h)"},
};

static const struct status_info *status_find(uint16_t status)
{
	uint16_t code = status & 0x7ff;
	for (size_t i = 0; i < sizeof(g_status) / sizeof(g_status[0]); i++)
		if (g_status[i].code == code)
			return &g_status[i];
	return NULL;
}

int nkv_status_errno(uint16_t status)
{
	if ((status & 0x7ff) == 0)
		return 0;
	const struct status_info *s = status_find(status);
	if (s)
		return -s->err;
	return ((status >> 8) & 7) == NKV_SCT_PATH ? -ENOTCONN : -EIO;
}

int nkv_cpl_errno(const struct nkv_cpl *cpl)
{
	if (!cpl)
		return -EINVAL;
	/* Method Failed: the method's own errno says more than the status; a DW0 that is no errno (a
	 * broken target) keeps the table's -EIO rather than inventing one. */
	if ((cpl->status & 0x7ff) == (NKV_SCT_GENERIC << 8 | NKV_SC_EXEC_FAILED) && cpl->dw0 >= 1 && cpl->dw0 <= 4095)
		return -(int)cpl->dw0;
	return nkv_status_errno(cpl->status);
}

const char *nkv_status_string(uint16_t status)
{
	static __thread char buf[64];
	const struct status_info *s = status_find(status);
	if (s)
		return s->name;
	snprintf(buf, sizeof(buf), "Unknown Status (SCT %Xh SC %02Xh)", (status >> 8) & 7u, status & 0xffu);
	return buf;
}
