/* SPDX-License-Identifier: Apache-2.0 */
/*
 * notify.h - the daemon's readiness and state for a service manager (systemd's sd_notify protocol:
 * a datagram to $NOTIFY_SOCKET). The unit (packaging/rados-nkv@.service.in) is Type=notify where
 * the daemon is built with libsystemd, so `systemctl start` returns once the daemon serves.
 */
#ifndef RADOS_NKV_NOTIFY_H
#define RADOS_NKV_NOTIFY_H

/* Send "NAME=value" lines (printf-style, newline-separated) to the service manager: READY=1,
 * RELOADING=1, STOPPING=1, STATUS=... A no-op where $NOTIFY_SOCKET is unset (not started by
 * systemd) or the daemon was built without libsystemd; a failure to send is logged once, never fatal. */
void daemon_notify(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* RELOADING=1 with the MONOTONIC_USEC= systemd wants alongside it, and @status as STATUS=. */
void daemon_notify_reloading(const char *status);

#endif
