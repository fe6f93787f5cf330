/* bench.c - nkv bench: asynchronous load generator on libnkv (issue 5; first cut lands next). */
#include "cli.h"

int cmd_bench(struct cli *c)
{
	(void)c;
	fputs("nkv: bench: not built yet\n", stderr);
	return EXIT_ERR;
}
