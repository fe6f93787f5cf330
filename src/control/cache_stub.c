/* TEMPORARY (branch cache-control only, removed when the cache core is merged): the core's cache
 * functions are declared on main but not implemented yet; these let the control plane link. */
#include <errno.h>
#include "nkv/nkv_target.h"
int nkv_ns_set_cache_policy(struct nkv_subsys *ss, uint32_t nsid, const struct nkv_cache_policy *p)
{
	(void)ss, (void)nsid, (void)p;
	return -ENOSYS;
}
int nkv_ns_cache_usage(struct nkv_subsys *ss, uint32_t nsid, struct nkv_cache_usage *out)
{
	(void)ss, (void)nsid, (void)out;
	return -ENOSYS;
}
