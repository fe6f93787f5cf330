/* SPDX-License-Identifier: Apache-2.0 */
/*
 * vfio_user_json.c - the VERSION message's capabilities, read with json-c (the daemon's JSON
 * library). The input is a hostile client's: the message is bounded (64 KiB), the tokener's nesting
 * depth too, the whole text must be one JSON object, and only the members of "capabilities" the
 * server uses are taken, each a non-negative integer.
 */
#include <errno.h>
#include <string.h>

#include <json-c/json.h>

#include "transport/vfio_user_int.h"

#define MAX_DEPTH 8

/** Take capability @name from @caps into @slot when present. @return false when it is not a
 *  non-negative integer below 2^53 (JSON's exact range). */
static bool cap_u64(struct json_object *caps, const char *name, uint64_t *slot)
{
	struct json_object *v;
	if (!json_object_object_get_ex(caps, name, &v))
		return true;
	if (!json_object_is_type(v, json_type_int))
		return false;
	int64_t n = json_object_get_int64(v);
	if (n < 0 || n >= (int64_t)1 << 53)
		return false;
	*slot = (uint64_t)n;
	return true;
}

int vfu_json_caps(const char *js, size_t len, struct vfu_caps *out)
{
	struct json_tokener *tok = json_tokener_new_ex(MAX_DEPTH);
	if (!tok || len > INT32_MAX) {
		json_tokener_free(tok);
		return -EINVAL;
	}
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
	struct json_object *top = json_tokener_parse_ex(tok, js, (int)len);
	bool ok = top && json_tokener_get_error(tok) == json_tokener_success &&
		  json_tokener_get_parse_end(tok) == len && json_object_is_type(top, json_type_object);
	json_tokener_free(tok);
	struct json_object *caps;
	if (ok && json_object_object_get_ex(top, "capabilities", &caps))
		ok = json_object_is_type(caps, json_type_object) && cap_u64(caps, "max_msg_fds", &out->max_msg_fds) &&
		     cap_u64(caps, "max_data_xfer_size", &out->max_data_xfer_size) &&
		     cap_u64(caps, "max_dma_maps", &out->max_dma_maps) && cap_u64(caps, "pgsizes", &out->pgsizes);
	json_object_put(top);
	return ok ? 0 : -EINVAL;
}
