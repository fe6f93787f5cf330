/* SPDX-License-Identifier: Apache-2.0 */
/* tlskey.c - nkv gen-tls-key: a random PSK for NVMe/TCP TLS in the interchange format (TP 8011). */
#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include "cli.h"
#include "common/nvme_psk.h"

int cmd_gen_tls_key(struct cli *c)
{
	const char *hh = c->nargs ? c->args[0] : "01";
	struct nkv_psk k = {0};
	char s[NKV_PSK_STR_MAX];

	if (strcmp(hh, "00") && strcmp(hh, "01") && strcmp(hh, "02"))
		return cli_usage(c, "gen-tls-key: bad hash '%s' (01: SHA-256, 32-byte key; 02: SHA-384, 48-byte key; "
				 "00: a 32-byte key used as is)", hh);
	k.hmac = (uint8_t)(hh[1] - '0');
	k.len = k.hmac == 2 ? 48 : 32;
	if (getrandom(k.key, k.len, 0) != (ssize_t)k.len)
		return cli_fail(c, "gen-tls-key", -errno, NULL, "no random bytes");
	nkv_psk_format(&k, s, sizeof(s));
	nkv_psk_wipe(&k, sizeof(k));
	if (c->json)
		printf("{\"command\":\"gen-tls-key\",\"key\":\"%s\"}\n", s);
	else
		printf("%s\n", s);
	nkv_psk_wipe(s, sizeof(s));
	return EXIT_OK;
}
