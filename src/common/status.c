/* SPDX-License-Identifier: Apache-2.0 */
/* status.c - the single errno -> NVMe status table (docs/design.md section 2.4). */
#include "status.h"

#include <errno.h>
#include <stddef.h>

struct errmap {
	int err;        /* positive errno */
	uint8_t sct;
	uint8_t sc;
	uint8_t retry;  /* 1: transient, DNR clear */
};

static const struct errmap g_map[] = {
	{ENOENT, NKV_SCT_GENERIC, NKV_SC_KV_KEY_NOT_EXIST, 0},
	{EEXIST, NKV_SCT_GENERIC, NKV_SC_KV_KEY_EXISTS, 0},
	{EFBIG, NKV_SCT_GENERIC, NKV_SC_KV_INVALID_VALUE_SIZE, 0},
	{E2BIG, NKV_SCT_GENERIC, NKV_SC_KV_INVALID_VALUE_SIZE, 0},
	{EMSGSIZE, NKV_SCT_GENERIC, NKV_SC_KV_INVALID_VALUE_SIZE, 0},
	{ENOSPC, NKV_SCT_GENERIC, NKV_SC_KV_CAPACITY_EXCEEDED, 0},
	{EDQUOT, NKV_SCT_GENERIC, NKV_SC_KV_CAPACITY_EXCEEDED, 0},
	{EIO, NKV_SCT_GENERIC, NKV_SC_KV_UNRECOVERED_ERROR, 0},
	{EROFS, NKV_SCT_GENERIC, NKV_SC_NS_WRITE_PROTECTED, 0},
	{EINVAL, NKV_SCT_GENERIC, NKV_SC_INVALID_FIELD, 0},
	{ETIMEDOUT, NKV_SCT_GENERIC, NKV_SC_KV_NS_NOT_READY, 1},
	{ENOTCONN, NKV_SCT_GENERIC, NKV_SC_KV_NS_NOT_READY, 1},
	{ECONNREFUSED, NKV_SCT_GENERIC, NKV_SC_KV_NS_NOT_READY, 1},
	{ESHUTDOWN, NKV_SCT_GENERIC, NKV_SC_KV_NS_NOT_READY, 1},
	{EAGAIN, NKV_SCT_GENERIC, NKV_SC_KV_NS_NOT_READY, 1},
	{ENOMEM, NKV_SCT_GENERIC, NKV_SC_INTERNAL, 1},
	{ECANCELED, NKV_SCT_GENERIC, NKV_SC_ABORTED_SQ_DELETION, 1},
};

nkv_status nkv_errno_to_status(int rc)
{
	if (rc >= 0)
		return nkv_status_make(NKV_SCT_GENERIC, NKV_SC_SUCCESS, 0);
	for (size_t i = 0; i < sizeof(g_map) / sizeof(g_map[0]); i++)
		if (g_map[i].err == -rc)
			return nkv_status_make(g_map[i].sct, g_map[i].sc, !g_map[i].retry);
	return nkv_status_make(NKV_SCT_GENERIC, NKV_SC_INTERNAL, 1);
}

const char *nkv_status_str(nkv_status st)
{
	static const struct {
		uint16_t code; /* SCT << 8 | SC */
		const char *name;
	} names[] = {
		{0x000, "Success"},
		{0x001, "Invalid Command Opcode"},
		{0x002, "Invalid Field in Command"},
		{0x004, "Data Transfer Error"},
		{0x006, "Internal Error"},
		{0x007, "Command Abort Requested"},
		{0x008, "Command Aborted due to SQ Deletion"},
		{0x00b, "Invalid Namespace or Format"},
		{0x00c, "Command Sequence Error"},
		{0x00f, "Data SGL Length Invalid"},
		{0x019, "Keep Alive Timer Expired"},
		{0x020, "Namespace is Write Protected"},
		{0x081, "KV Capacity Exceeded"},
		{0x082, "KV Namespace Not Ready"},
		{0x085, "KV Invalid Value Size"},
		{0x086, "KV Invalid Key Size"},
		{0x087, "KV Key Does Not Exist"},
		{0x088, "KV Unrecovered Error"},
		{0x089, "KV Key Exists"},
		{0x101, "Invalid Queue Identifier"},
		{0x102, "Invalid Queue Size"},
		{0x105, "Asynchronous Event Request Limit Exceeded"},
		{0x109, "Invalid Log Page"},
		{0x10d, "Feature Identifier Not Saveable"},
		{0x10e, "Feature Not Changeable"},
		{0x12b, "I/O Command Set Combination Rejected"},
		{0x184, "Connect Invalid Host"},
	};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (names[i].code == nkv_status_code(st))
			return names[i].name;
	return "Unknown Status";
}
