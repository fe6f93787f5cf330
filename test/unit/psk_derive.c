/* SPDX-License-Identifier: Apache-2.0 */
/*
 * psk_derive.c - prints the PSK identity and TLS PSK (hex) that src/common/nvme_psk.c derives, for
 * test/unit/psk_vectors.py to compare with its own HKDF.
 * usage: psk_derive KEY VERSION HOSTNQN SUBNQN   (KEY: the interchange string or @FILE)
 */
#include <stdio.h>
#include <stdlib.h>

#include "common/nvme_psk.h"

int main(int argc, char **argv)
{
	struct nkv_psk k;
	struct nkv_tls_psk t;
	int rc;

	if (argc != 5) {
		fprintf(stderr, "usage: psk_derive KEY VERSION HOSTNQN SUBNQN\n");
		return 64;
	}
	if ((rc = nkv_psk_load(argv[1], &k)) < 0 || (rc = nkv_psk_derive(&k, (unsigned)atoi(argv[2]), argv[3], argv[4], &t)) < 0) {
		printf("error %d\n", rc);
		return 0;
	}
	printf("%s\n", t.identity);
	for (unsigned i = 0; i < t.len; i++)
		printf("%02x", t.key[i]);
	printf("\n");
	return 0;
}
