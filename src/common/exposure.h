/* SPDX-License-Identifier: Apache-2.0 */
/*
 * exposure.h - the one rule on subsystems that admit any host by default.
 *
 * A subsystem configured without an allowlist and without the operator's explicit allow-any-host
 * admits any host, but only where no host on the network can reach it. Every place that decides
 * whether such a subsystem is served through a listener asks nkv_listener_exposes(): the daemon's
 * startup check (and --check), the control plane before it commits a change, the reconciler's log
 * and the target itself at Connect (its TCP listeners are marked with it).
 */
#ifndef NKV_COMMON_EXPOSURE_H
#define NKV_COMMON_EXPOSURE_H

#include <stdbool.h>

/** Is @addr (a listener address; "" = every address) reachable only from this machine? "localhost",
 *  127.0.0.0/8, ::1 and ::ffff:127.0.0.0/104 are; "", 0.0.0.0, :: and any other name are not. */
bool nkv_addr_is_loopback(const char *addr);

/**
 * Would a listener on @addr (@tls: a secure one) let hosts on the network reach a subsystem that has
 * no allowlist and no explicit allow-any-host? A plain listener off loopback would; a TLS listener
 * would not (only hosts holding a PSK for the subsystem get in); a loopback one would not.
 */
bool nkv_listener_exposes(const char *addr, bool tls);

#endif
