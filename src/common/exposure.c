/* SPDX-License-Identifier: Apache-2.0 */
/* exposure.c - the one rule on subsystems that admit any host by default (exposure.h). */
#include "common/exposure.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

bool nkv_addr_is_loopback(const char *addr)
{
	struct in_addr a4;
	struct in6_addr a6;

	if (!addr)
		return false;
	if (strcmp(addr, "localhost") == 0)
		return true;
	if (inet_pton(AF_INET, addr, &a4) == 1)
		return (ntohl(a4.s_addr) >> 24) == 127;
	if (inet_pton(AF_INET6, addr, &a6) == 1)
		return IN6_IS_ADDR_LOOPBACK(&a6) || (IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127);
	return false; /* "" (every address), a wildcard or a name that may resolve anywhere */
}

bool nkv_listener_exposes(const char *addr, bool tls)
{
	return !tls && !nkv_addr_is_loopback(addr);
}
