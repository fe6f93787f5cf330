/* SPDX-License-Identifier: Apache-2.0 */
/*
 * replay.c - runs the fuzz target without libFuzzer (gcc builds, CI): every file of the corpus
 * directories given, then deterministic mutations of each (byte flips, truncations).
 * Exits non-zero only by crashing or aborting inside the target, as libFuzzer would report.
 *
 * Options (before or between the paths): -mutations=N per file (default 500), -min_len=N the
 * shortest truncation (default 67, one fuzz_sqe record).
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static int g_mutations = 500;
static size_t g_min_len = 67;

static size_t run_file(const char *path, uint64_t *seed)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf, *mut;
	long n;

	if (!f)
		return 0;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)n + 1);
	mut = malloc((size_t)n + 1);
	if (fread(buf, 1, (size_t)n, f) != (size_t)n)
		n = 0;
	fclose(f);
	LLVMFuzzerTestOneInput(buf, (size_t)n);
	for (int i = 0; i < g_mutations && n > 0; i++) {
		size_t len = (size_t)n;
		memcpy(mut, buf, len);
		int flips = 1 + (int)(rnd(seed) % 8);
		for (int j = 0; j < flips; j++)
			mut[rnd(seed) % len] ^= (uint8_t)(1u << (rnd(seed) % 8));
		if (rnd(seed) % 4 == 0)
			len = g_min_len + rnd(seed) % len;
		if (len > (size_t)n)
			len = (size_t)n;
		LLVMFuzzerTestOneInput(mut, len);
	}
	free(buf);
	free(mut);
	return 1;
}

int main(int argc, char **argv)
{
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	size_t files = 0;

	for (int i = 1; i < argc; i++) {
		DIR *d;
		struct dirent *e;
		if (strncmp(argv[i], "-mutations=", 11) == 0) {
			g_mutations = atoi(argv[i] + 11);
			continue;
		}
		if (strncmp(argv[i], "-min_len=", 9) == 0) {
			g_min_len = (size_t)strtoul(argv[i] + 9, NULL, 0);
			continue;
		}
		if (!(d = opendir(argv[i]))) {
			files += run_file(argv[i], &seed);
			continue;
		}
		while ((e = readdir(d)) != NULL) {
			char path[4096];
			if (e->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "%s/%s", argv[i], e->d_name);
			files += run_file(path, &seed);
		}
		closedir(d);
	}
	printf("replayed %zu corpus files with %d mutations each\n", files, g_mutations);
	return files ? 0 : 1;
}
