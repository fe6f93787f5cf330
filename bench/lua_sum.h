/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lua_sum.h - the computational-storage example shared by exec_bench and the exec_func test: a Lua
 * script for the OSD's cls_lua (an allowlist rule binds it, handler "sum") that sums an object's
 * little-endian signed 64-bit words (a tail of fewer than 8 bytes added byte by byte), read in 4 MiB
 * pieces; integer overflow wraps as in C.
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
