/* SPDX-License-Identifier: Apache-2.0 */
/* table.c - nkv-ctl's tables for people: columns padded to their widest cell. */
#include <stdlib.h>
#include <string.h>

#include "ctl_cli.h"

#define TAB_MAXCOL 12

struct table {
	int ncol;
	size_t rows, cap;
	char **cells; /* (rows + 1) x ncol, the header first */
};

static void add(struct table *t, const char *const *cells)
{
	if (t->rows + 1 >= t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 16;
		char **n = realloc(t->cells, cap * (size_t)t->ncol * sizeof(*n));
		if (!n)
			return; /* out of memory: the row is left out */
		t->cells = n;
		t->cap = cap;
	}
	for (int i = 0; i < t->ncol; i++)
		t->cells[t->rows * (size_t)t->ncol + (size_t)i] = strdup(cells[i] ? cells[i] : "");
	t->rows++;
}

struct table *tab_new(int ncol, const char *const *heads)
{
	struct table *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->ncol = ncol > TAB_MAXCOL ? TAB_MAXCOL : ncol;
	add(t, heads);
	return t;
}

void tab_row(struct table *t, const char *const *cells)
{
	if (t)
		add(t, cells);
}

void tab_print(struct table *t, FILE *f, int indent)
{
	if (!t)
		return;
	size_t w[TAB_MAXCOL] = {0};
	for (size_t r = 0; r < t->rows; r++)
		for (int i = 0; i < t->ncol; i++) {
			const char *s = t->cells[r * (size_t)t->ncol + (size_t)i];
			size_t n = s ? strlen(s) : 0;
			if (n > w[i])
				w[i] = n;
		}
	for (size_t r = 0; r < t->rows; r++) {
		fprintf(f, "%*s", indent, "");
		for (int i = 0; i < t->ncol; i++) {
			const char *s = t->cells[r * (size_t)t->ncol + (size_t)i];
			if (i == t->ncol - 1)
				fprintf(f, "%s\n", s ? s : "");
			else
				fprintf(f, "%-*s  ", (int)w[i], s ? s : "");
		}
	}
	for (size_t k = 0; k < t->rows * (size_t)t->ncol; k++)
		free(t->cells[k]);
	free(t->cells);
	free(t);
}
