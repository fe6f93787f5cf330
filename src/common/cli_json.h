/* SPDX-License-Identifier: Apache-2.0 */
/* cli_json.h - what the command-line tools (nkv, nkv-ctl) share about "-o json". */
#ifndef NKV_COMMON_CLI_JSON_H
#define NKV_COMMON_CLI_JSON_H

#include <stdbool.h>
#include <string.h>

/* "-o json", "-ojson", "--output json", "--output=json" anywhere (the last wins, as getopt's), looked
 * for before any option is parsed, so that even a bad option answers in JSON. */
static inline bool nkv_cli_wants_json(int argc, char **argv)
{
	bool json = false;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = NULL;
		if (strcmp(a, "--") == 0)
			break;
		if ((strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) && i + 1 < argc)
			v = argv[++i];
		else if (strncmp(a, "--output=", 9) == 0)
			v = a + 9;
		else if (strncmp(a, "-o", 2) == 0 && a[2])
			v = a + 2;
		if (v)
			json = strcmp(v, "json") == 0;
	}
	return json;
}

#endif
