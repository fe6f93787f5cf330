/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_group.c - libFuzzer target over the group-state loader (src/control/group_state.c): the
 * omap entries of a group's RADOS object as a hostile writer of the pool may leave them. The input
 * is a sequence of records {key length (2 bytes LE), key, value length (2 bytes LE), value}; the
 * entries go to group_parse as they are (any bytes, any order, repeated keys). Checks:
 *   - group_parse succeeds: a malformed entry is reported, never a failed load or a crash;
 *   - the state it makes passes st_check, and written back (group_flatten) and read again it is
 *     the same state, with no malformed entry and the same keys (the key mapping is one-to-one).
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/ctl_int.h"

#define MAX_ENTRIES 256

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Written back and read again: the same state, every entry well formed. */
static void round_trip(const struct group_parsed *g)
{
	json_object *flat = group_flatten(g->st);
	size_t n = (size_t)json_object_object_length(flat) + 1, i = 0;
	struct group_entry *e = calloc(n, sizeof(*e));
	char epoch[24];
	struct group_parsed g2;

	if (!e)
		abort();
	snprintf(epoch, sizeof(epoch), "%020" PRIu64, g->epoch);
	e[i++] = (struct group_entry){.key = "epoch", .klen = 5, .val = epoch, .vlen = strlen(epoch)};
	json_object_object_foreach(flat, k, v) {
		e[i++] = (struct group_entry){.key = k, .klen = strlen(k), .val = json_object_get_string(v),
					      .vlen = (size_t)json_object_get_string_len(v)};
	}
	if (group_parse(e, i, &g2) < 0)
		abort();
	if (g2.nbad) {
		fprintf(stderr, "a state written back has malformed entries: %s\n", json_object_to_json_string(g2.bad));
		abort();
	}
	if (!json_object_equal(g->st, g2.st) || json_object_object_length(g2.raw) != json_object_object_length(flat)) {
		fprintf(stderr, "read back differently:\n%s\n%s\n", json_object_to_json_string(g->st),
			json_object_to_json_string(g2.st));
		abort();
	}
	group_parsed_free(&g2);
	free(e);
	json_object_put(flat);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct group_entry e[MAX_ENTRIES];
	struct group_parsed g;
	size_t n = 0, off = 0;
	const char *why = NULL;

	while (n < MAX_ENTRIES && off + 2 <= size) {
		size_t kl = data[off] | (size_t)data[off + 1] << 8, vl;
		off += 2;
		if (kl > size - off)
			kl = size - off;
		e[n].key = (const char *)data + off;
		e[n].klen = kl;
		off += kl;
		vl = off + 2 <= size ? (data[off] | (size_t)data[off + 1] << 8) : 0;
		off += off + 2 <= size ? 2 : 0;
		if (vl > size - off)
			vl = size - off;
		e[n].val = (const char *)data + off;
		e[n].vlen = vl;
		off += vl;
		n++;
	}
	if (group_parse(e, n, &g) < 0)
		abort(); /* entries that pass their checks make a state that fails st_check */
	if (st_check(g.st, &why) < 0 || json_object_array_length(g.bad) > g.nbad)
		abort();
	round_trip(&g);
	group_parsed_free(&g);
	return 0;
}
