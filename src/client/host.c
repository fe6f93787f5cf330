/* SPDX-License-Identifier: Apache-2.0 */
/*
 * host.c - the host identity (host NQN and host ID) libnkv and nkv present to controllers, found
 * the way nvme-cli finds it: /etc/nvme/hostnqn and /etc/nvme/hostid, else derived from the
 * machine's DMI product UUID, else generated once for this process. A stable identity matters:
 * allowlists (--allow-host) and the target's per-host accounting key on it.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "client/internal.h"

#define UUID_NQN_PREFIX "nqn.2014-08.org.nvmexpress:uuid:"
#define DMI_UUID_PATH "/sys/class/dmi/id/product_uuid"

static int hexval(int ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	ch = tolower(ch);
	return ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
}

int nkv_uuid_parse(const char *s, uint8_t uuid[16])
{
	static const int dash[] = {8, 13, 18, 23};
	uint8_t u[16];
	unsigned n = 0;

	if (!s || strlen(s) != 36)
		return -EINVAL;
	for (unsigned i = 0, d = 0; i < 36;) {
		if (d < 4 && i == (unsigned)dash[d]) {
			if (s[i] != '-')
				return -EINVAL;
			i++, d++;
			continue;
		}
		int hi = hexval((unsigned char)s[i]), lo = hexval((unsigned char)s[i + 1]);
		if (hi < 0 || lo < 0)
			return -EINVAL;
		u[n++] = (uint8_t)(hi << 4 | lo);
		i += 2;
	}
	memcpy(uuid, u, 16);
	return 0;
}

void nkv_uuid_format(const uint8_t u[16], char out[37])
{
	snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1], u[2],
		 u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
}

int nkv_hostnqn_check(const char *nqn)
{
	size_t n = nqn ? strlen(nqn) : 0;

	/* NVMe Base 4.5.1: "nqn." then a name; the Connect data field holds at most 223 bytes + NUL. */
	if (n < 5 || n > NKV_HOSTNQN_MAX - 1 || strncmp(nqn, "nqn.", 4) != 0)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (!isgraph((unsigned char)nqn[i])) /* a space or control byte: a torn or binary file */
			return -EINVAL;
	return 0;
}

/*
 * Read a small identity file, trimmed of surrounding whitespace (`echo $NQN > /etc/nvme/hostnqn`
 * leaves a newline). @return 1 with @out filled, 0 when the file cannot be opened (absent, as
 * nvme-cli treats it), or -EINVAL when it is too long to be an identity.
 */
static int read_trimmed(const char *path, char *out, size_t cap)
{
	char buf[512];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		return 0;
	buf[n] = '\0';
	if (strlen(buf) != (size_t)n) /* a NUL inside */
		return -EINVAL;
	char *b = buf, *e = buf + n;
	while (b < e && isspace((unsigned char)*b))
		b++;
	while (e > b && isspace((unsigned char)e[-1]))
		e--;
	if ((size_t)(e - b) >= cap)
		return -EINVAL;
	memcpy(out, b, (size_t)(e - b));
	out[e - b] = '\0';
	return 1;
}

static bool uuid_usable(const uint8_t u[16])
{
	unsigned zero = 0, ff = 0;
	for (int i = 0; i < 16; i++) {
		zero += u[i] == 0;
		ff += u[i] == 0xff;
	}
	return zero < 16 && ff < 16; /* firmware that never set one reports all 0s or all 1s */
}

/* The DMI product UUID, as nvme-cli derives host identities from it. @return 0 or -ENOENT. */
static int dmi_uuid(uint8_t u[16])
{
	char s[64];
	return read_trimmed(DMI_UUID_PATH, s, sizeof(s)) == 1 && nkv_uuid_parse(s, u) == 0 && uuid_usable(u) ? 0
													       : -ENOENT;
}

static pthread_once_t g_random_once = PTHREAD_ONCE_INIT;
static uint8_t g_random_id[16];

/* Last resort: one UUID for the life of the process, so every connection of a run agrees. */
static void random_init(void)
{
	if (getrandom(g_random_id, sizeof(g_random_id), 0) != (ssize_t)sizeof(g_random_id)) {
		/* No entropy source: still unique enough per process for a host identifier. */
		uint64_t t = (uint64_t)nkv_client_now_ms() ^ ((uint64_t)getpid() << 32);
		memcpy(g_random_id, &t, sizeof(t));
		t = (uint64_t)(uintptr_t)&t;
		memcpy(g_random_id + 8, &t, sizeof(t));
	}
	g_random_id[6] = (uint8_t)((g_random_id[6] & 0x0f) | 0x40); /* UUID version 4 */
	g_random_id[8] = (uint8_t)((g_random_id[8] & 0x3f) | 0x80); /* RFC 4122 variant */
}

static const char *env_or(const char *var, const char *dflt)
{
	const char *v = getenv(var);
	return v && *v ? v : dflt;
}

int nkv_host_ident_load(struct nkv_host_ident *h)
{
	char s[NKV_HOSTNQN_MAX]; /* longer files are malformed (read_trimmed) */
	int rc, ret = 0;

	memset(h, 0, sizeof(*h));
	snprintf(h->hostnqn_file, sizeof(h->hostnqn_file), "%s", env_or("NKV_HOSTNQN_FILE", "/etc/nvme/hostnqn"));
	snprintf(h->hostid_file, sizeof(h->hostid_file), "%s", env_or("NKV_HOSTID_FILE", "/etc/nvme/hostid"));

	/* A malformed file is reported, and the identity settled as if it were absent. */
	if ((rc = read_trimmed(h->hostid_file, s, sizeof(s))) < 0 || (rc == 1 && nkv_uuid_parse(s, h->hostid)))
		ret = -EINVAL;
	else if (rc == 1)
		h->hostid_src = NKV_HOST_SRC_FILE;

	if ((rc = read_trimmed(h->hostnqn_file, s, sizeof(s))) < 0 || (rc == 1 && nkv_hostnqn_check(s))) {
		h->bad_hostnqn = true;
		ret = -EINVAL;
	} else if (rc == 1) {
		snprintf(h->hostnqn, sizeof(h->hostnqn), "%s", s);
		h->hostnqn_src = NKV_HOST_SRC_FILE;
		/* nvme-cli: without a hostid file, a uuid NQN's UUID is the host ID. */
		if (!h->hostid_src && strncmp(s, UUID_NQN_PREFIX, strlen(UUID_NQN_PREFIX)) == 0 &&
		    nkv_uuid_parse(s + strlen(UUID_NQN_PREFIX), h->hostid) == 0)
			h->hostid_src = NKV_HOST_SRC_NQN;
	}
	if (!h->hostid_src) {
		if (dmi_uuid(h->hostid) == 0) {
			h->hostid_src = NKV_HOST_SRC_DMI;
		} else {
			pthread_once(&g_random_once, random_init);
			memcpy(h->hostid, g_random_id, 16);
			h->hostid_src = NKV_HOST_SRC_RANDOM;
		}
	}
	if (!h->hostnqn_src) {
		/* The host ID in use (from its file, DMI, or this run's), as nvme gen-hostnqn does. */
		char u[37];
		nkv_uuid_format(h->hostid, u);
		snprintf(h->hostnqn, sizeof(h->hostnqn), UUID_NQN_PREFIX "%s", u);
		h->hostnqn_src = h->hostid_src == NKV_HOST_SRC_FILE ? NKV_HOST_SRC_HOSTID : h->hostid_src;
	}
	return ret;
}

const char *nkv_host_src_name(enum nkv_host_src src)
{
	switch (src) {
	case NKV_HOST_SRC_FILE:
		return "file";
	case NKV_HOST_SRC_NQN:
		return "hostnqn";
	case NKV_HOST_SRC_HOSTID:
		return "hostid";
	case NKV_HOST_SRC_DMI:
		return "dmi";
	case NKV_HOST_SRC_RANDOM:
		return "random";
	case NKV_HOST_SRC_OPTION:
		return "option";
	default:
		return "none";
	}
}
