/*
 * lua_sum.h - the computational-storage example shared by exec_bench and the exec_func test: a Lua
 * script for the OSD's lua.eval_json that sums an object's little-endian signed 64-bit words (a tail
 * of fewer than 8 bytes added byte by byte), read in 4 MiB pieces; integer overflow wraps as in C.
 */
#ifndef NKV_LUA_SUM_H
#define NKV_LUA_SUM_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static const char nkv_lua_sum_script[] =
	"function sum(input, output)\n"
	"  local size = objclass.stat()\n"
	"  local acc, off = 0, 0\n"
	"  while off < size do\n"
	"    local n = math.min(4194304, size - off)\n"
	"    local s = objclass.read(off, n):str()\n"
	"    local i, m = 1, n - n % 8\n"
	"    while i <= m do acc = acc + string.unpack('<i8', s, i); i = i + 8 end\n"
	"    while i <= n do acc = acc + string.byte(s, i); i = i + 1 end\n"
	"    off = off + n\n"
	"  end\n"
	"  output:append(string.format('%d', acc))\n"
	"end\n"
	"objclass.register(sum)\n";

/** lua.eval_json's input for the script: {"script": ..., "handler": "sum", "input": ""} (the script
 *  has no quotes or backslashes; newlines become \n). @return its length, or 0 if @n is too small. */
static inline size_t nkv_lua_sum_json(char *out, size_t n)
{
	size_t o = (size_t)snprintf(out, n, "{\"script\": \"");
	for (const char *p = nkv_lua_sum_script; *p && o + 3 < n; p++)
		o += (size_t)snprintf(out + o, n - o, *p == '\n' ? "\\n" : "%c", *p);
	int tail = snprintf(out + o, o < n ? n - o : 0, "\", \"handler\": \"sum\", \"input\": \"\"}");
	return o + (size_t)tail < n ? o + (size_t)tail : 0;
}

/** The same sum computed on the host (what the script's answer is checked against), as the signed
 *  value the script prints. */
static inline int64_t nkv_lua_sum_local(const uint8_t *b, size_t n)
{
	uint64_t acc = 0, w;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		memcpy(&w, b + i, 8);
		acc += w;
	}
	for (; i < n; i++)
		acc += b[i];
	return (int64_t)acc;
}

#endif
