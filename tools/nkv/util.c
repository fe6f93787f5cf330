/* SPDX-License-Identifier: Apache-2.0 */
/* util.c - nkv CLI helpers: keys, JSON strings, sizes, file input/output. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static int hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	ch = (char)tolower((unsigned char)ch);
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	return -1;
}

int key_parse(const struct cli *c, const char *s, uint8_t key[16], unsigned *klen)
{
	size_t n = strlen(s);
	if (!c->hex) {
		if (n < 1 || n > NKV_KEY_MAX) {
			cli_usage(c, "key '%s' is %zu bytes; keys are 1 to 16 bytes (use --hex for binary keys)", s, n);
			return -EINVAL;
		}
		memcpy(key, s, n);
		*klen = (unsigned)n;
		return 0;
	}
	if (n >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		s += 2;
		n -= 2;
	}
	if (n < 2 || n > 2 * NKV_KEY_MAX || (n & 1)) {
		cli_usage(c, "hex key '%s' must have 2 to 32 hex digits, an even number", s);
		return -EINVAL;
	}
	for (size_t i = 0; i < n / 2; i++) {
		int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);
		if (hi < 0 || lo < 0) {
			cli_usage(c, "'%s' is not a hex key", s);
			return -EINVAL;
		}
		key[i] = (uint8_t)(hi << 4 | lo);
	}
	*klen = (unsigned)(n / 2);
	return 0;
}

void key_hex(char out[33], const uint8_t *key, unsigned klen)
{
	static const char hx[] = "0123456789abcdef";
	for (unsigned i = 0; i < klen; i++) {
		out[2 * i] = hx[key[i] >> 4];
		out[2 * i + 1] = hx[key[i] & 15];
	}
	out[2 * klen] = '\0';
}

void key_print(FILE *f, const struct cli *c, const uint8_t *key, unsigned klen)
{
	if (c->hex) {
		char h[33];
		key_hex(h, key, klen);
		fputs(h, f);
		return;
	}
	for (unsigned i = 0; i < klen; i++) {
		if (isprint(key[i]) && key[i] != '\\')
			fputc(key[i], f);
		else
			fprintf(f, "\\x%02x", key[i]);
	}
}

void json_str(FILE *f, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	fputc('"', f);
	for (size_t i = 0; i < len; i++) {
		uint8_t ch = p[i];
		switch (ch) {
		case '"':
			fputs("\\\"", f);
			break;
		case '\\':
			fputs("\\\\", f);
			break;
		case '\n':
			fputs("\\n", f);
			break;
		case '\t':
			fputs("\\t", f);
			break;
		case '\r':
			fputs("\\r", f);
			break;
		default:
			if (ch < 0x20 || ch >= 0x7f)
				fprintf(f, "\\u%04x", ch); /* bytes, not UTF-8: one code point per byte */
			else
				fputc(ch, f);
		}
	}
	fputc('"', f);
}

const char *size_str(uint64_t n, char buf[32])
{
	static const char *const unit[] = {"KiB", "MiB", "GiB", "TiB"};
	if (n < 1024) {
		snprintf(buf, 32, "%llu bytes", (unsigned long long)n);
		return buf;
	}
	double v = (double)n;
	int u = -1;
	while (v >= 1024 && u < 3) {
		v /= 1024;
		u++;
	}
	if (v == (double)(uint64_t)v)
		snprintf(buf, 32, "%llu %s", (unsigned long long)v, unit[u]);
	else
		snprintf(buf, 32, "%.1f %s", v, unit[u]);
	return buf;
}

const char *status_name(uint16_t status, char buf[96])
{
	snprintf(buf, 96, "%s", nkv_status_string(status));
	char *p = strstr(buf, " (SCT");
	if (p)
		*p = '\0';
	return buf;
}

int read_input(const char *path, uint8_t **buf, size_t *len, size_t limit)
{
	int fd = (!path || strcmp(path, "-") == 0) ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t cap = 65536, n = 0;
	uint8_t *b = malloc(cap);
	int rc = 0;
	if (!b)
		rc = -ENOMEM;
	while (rc == 0) {
		if (n == cap) {
			if (cap > limit) {
				rc = -EFBIG;
				break;
			}
			uint8_t *nb = realloc(b, cap * 2);
			if (!nb) {
				rc = -ENOMEM;
				break;
			}
			b = nb;
			cap *= 2;
		}
		ssize_t r = read(fd, b + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			rc = -errno;
		else if (r == 0)
			break;
		else
			n += (size_t)r;
	}
	if (fd != STDIN_FILENO)
		close(fd);
	if (rc == 0 && n > limit)
		rc = -EFBIG;
	if (rc) {
		free(b);
		return rc;
	}
	*buf = b;
	*len = n;
	return 0;
}

int write_output(const char *path, const void *buf, size_t len)
{
	bool out = !path || strcmp(path, "-") == 0;
	int fd = out ? STDOUT_FILENO : open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	const uint8_t *p = buf;
	int rc = 0;
	while (len) {
		ssize_t w = write(fd, p, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			rc = -errno;
			break;
		}
		p += w;
		len -= (size_t)w;
	}
	if (!out && close(fd) < 0 && rc == 0)
		rc = -errno;
	return rc;
}

int parse_size(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || end == s || *s == '-')
		return -EINVAL;
	unsigned shift = 0;
	switch (tolower((unsigned char)*end)) {
	case 'k':
		shift = 10;
		break;
	case 'm':
		shift = 20;
		break;
	case 'g':
		shift = 30;
		break;
	case '\0':
		break;
	default:
		return -EINVAL;
	}
	if (*end && end[1] && strcasecmp(end + 1, "ib") != 0 && strcasecmp(end + 1, "b") != 0)
		return -EINVAL;
	if (shift && v > (~0ull >> shift))
		return -EINVAL;
	*out = v << shift;
	return 0;
}
