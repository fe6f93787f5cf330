/* SPDX-License-Identifier: Apache-2.0 */
/*
 * disc.c - discovery for libnkv: connect to the discovery controller, read log page 70h the way
 * libnvme does (header, then entries at LPO 1024 in chunks of <= 4096 bytes, then the header again
 * to catch a change of GENCTR), decode the entries (docs/nvme-kv-wire.md C.10).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client/internal.h"
#include "common/log.h"

#define DISC_CHUNK 4096u
#define DISC_RETRIES 8
#define DISC_MAX_RECORDS 4096u /* 4 MiB of log: more is a broken target, not a big fabric */

static int get_log(struct nkv_ctrl *ctrl, uint8_t lid, uint64_t lpo, void *buf, uint32_t len)
{
	struct nkv_sqe sqe;
	uint32_t numd = len / 4 - 1; /* 0's based dwords */
	memset(&sqe, 0, sizeof(sqe));
	sqe.opc = NKV_ADM_GET_LOG_PAGE;
	nkv_put32(&sqe.cdw10, lid | (numd & 0xffff) << 16);
	nkv_put32(&sqe.cdw11, numd >> 16);
	nkv_put32(&sqe.cdw12, (uint32_t)lpo);
	nkv_put32(&sqe.cdw13, (uint32_t)(lpo >> 32));
	return nkv_admin(ctrl, &sqe, buf, len, NULL);
}

/** Copy a space- or NUL-padded ASCII field into a C string. */
static void field_str(char *dst, size_t cap, const char *src, size_t n)
{
	size_t len = strnlen(src, n);
	while (len && src[len - 1] == ' ')
		len--;
	if (len >= cap)
		len = cap - 1;
	memcpy(dst, src, len);
	dst[len] = '\0';
}

static void decode(const struct nkv_disc_log_entry *e, struct nkv_disc_entry *d)
{
	memset(d, 0, sizeof(*d));
	d->trtype = e->trtype;
	d->adrfam = e->adrfam;
	d->subtype = e->subtype;
	d->treq = e->treq;
	d->portid = nkv_get16(&e->portid);
	d->cntlid = nkv_get16(&e->cntlid);
	d->asqsz = nkv_get16(&e->asqsz);
	field_str(d->trsvcid, sizeof(d->trsvcid), e->trsvcid, sizeof(e->trsvcid));
	field_str(d->traddr, sizeof(d->traddr), e->traddr, sizeof(e->traddr));
	field_str(d->subnqn, sizeof(d->subnqn), e->subnqn, sizeof(e->subnqn));
}

/** One consistent read of the log. @return 0, -EAGAIN (GENCTR moved), or -errno. */
static int read_log(struct nkv_ctrl *ctrl, struct nkv_disc_entry **entries, unsigned *n)
{
	struct nkv_disc_log_hdr hdr;
	int rc = get_log(ctrl, NKV_LID_DISCOVERY, 0, &hdr, sizeof(hdr));
	if (rc)
		return rc;
	uint64_t gen = nkv_get64(&hdr.genctr), numrec = nkv_get64(&hdr.numrec);
	if (numrec > DISC_MAX_RECORDS) {
		NKV_WARN("discovery log claims %llu records", (unsigned long long)numrec);
		return -EPROTO;
	}
	size_t bytes = (size_t)numrec * sizeof(struct nkv_disc_log_entry);
	uint8_t *raw = bytes ? calloc(1, bytes) : NULL;
	struct nkv_disc_entry *out = calloc(numrec ? numrec : 1, sizeof(*out));
	if ((bytes && !raw) || !out) {
		free(raw);
		free(out);
		return -ENOMEM;
	}
	for (size_t off = 0; off < bytes && rc == 0; off += DISC_CHUNK) {
		uint32_t len = bytes - off < DISC_CHUNK ? (uint32_t)(bytes - off) : DISC_CHUNK;
		rc = get_log(ctrl, NKV_LID_DISCOVERY, sizeof(hdr) + off, raw + off, len);
	}
	if (rc == 0)
		rc = get_log(ctrl, NKV_LID_DISCOVERY, 0, &hdr, sizeof(hdr));
	if (rc == 0 && (nkv_get64(&hdr.genctr) != gen || nkv_get64(&hdr.numrec) != numrec))
		rc = -EAGAIN;
	if (rc == 0) {
		for (uint64_t i = 0; i < numrec; i++) {
			struct nkv_disc_log_entry e;
			memcpy(&e, raw + i * sizeof(e), sizeof(e));
			decode(&e, &out[i]);
		}
		*entries = out;
		*n = (unsigned)numrec;
		out = NULL;
	}
	free(raw);
	free(out);
	return rc;
}

int nkv_discover(const char *traddr, const char *trsvcid, const struct nkv_conn_opts *opts,
		 struct nkv_disc_entry **entries, unsigned *n)
{
	struct nkv_conn_opts o = {0};
	struct nkv_ctrl *ctrl;
	if (!traddr || !entries || !n)
		return -EINVAL;
	if (opts)
		o = *opts;
	o.no_keepalive = true; /* a short-lived association: KATO 0, as Linux does for discovery */
	int rc = nkv_connect(traddr, trsvcid ? trsvcid : "8009", NKV_DISCOVERY_NQN, &o, &ctrl);
	if (rc)
		return rc;
	for (int i = 0; i < DISC_RETRIES; i++) {
		rc = read_log(ctrl, entries, n);
		if (rc != -EAGAIN)
			break;
	}
	nkv_disconnect(ctrl);
	return rc;
}

int nkv_discover_subsys(const char *traddr, const char *trsvcid, const struct nkv_conn_opts *opts,
			struct nkv_disc_entry *sub, struct nkv_disc_entry **entries, unsigned *n)
{
	struct nkv_conn_opts o = {0};
	struct nkv_disc_entry *e = NULL;
	unsigned ne = 0, found = 0;
	bool given = trsvcid && *trsvcid;
	if (!traddr || !sub)
		return -EINVAL;
	if (opts)
		o = *opts;
	if (!given)
		o.tls = false; /* port 8009 is plain TCP; the entry then says whether its port needs TLS */
	int rc = nkv_discover(traddr, given ? trsvcid : NKV_DISCOVERY_PORT, &o, &e, &ne);
	if (rc)
		return rc;
	/* With TLS, an entry of a port that requires it; without, one that does not; either when no
	 * entry fits (a target that leaves TREQ "not specified"). */
	for (unsigned pass = 0; pass < 2 && !found; pass++)
		for (unsigned i = 0; i < ne; i++) {
			if (e[i].subtype != NKV_SUBTYPE_NVME || e[i].trtype != NKV_TRTYPE_TCP ||
			    (pass == 0 && ((e[i].treq & 3) == NKV_TREQ_REQUIRED) != (opts && opts->tls)))
				continue;
			/* the same subsystem on several ports is one choice, not two */
			if (found && strcmp(e[i].subnqn, sub->subnqn) == 0)
				continue;
			if (!found)
				*sub = e[i];
			found++;
		}
	if (entries && n) {
		*entries = e;
		*n = ne;
	} else {
		free(e);
	}
	return found == 0 ? -ENOENT : found > 1 ? -ENOTUNIQ : 0;
}
