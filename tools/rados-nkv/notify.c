/* SPDX-License-Identifier: Apache-2.0 */
/*
 * notify.c - readiness notification (notify.h) through libsystemd's sd_notify(3): READY=1 once every
 * listener, the control socket and the metrics endpoint are up and the backend is reached,
 * RELOADING=1 / READY=1 around a SIGHUP reload, STOPPING=1 at shutdown. Built without libsystemd
 * (Debian libsystemd-dev), every call is a no-op and the unit is installed as Type=simple instead.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define NKV_LOG_COMPONENT "daemon"
#include "common/log.h"
#include "notify.h"

#ifdef NKV_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

void daemon_notify(const char *fmt, ...)
{
#ifdef NKV_HAVE_SYSTEMD
	static bool warned;
	char msg[512];
	va_list ap;
	int rc;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* 0: not started by a service manager ($NOTIFY_SOCKET unset); < 0: it is set but unusable */
	rc = sd_notify(0, msg);
	if (rc < 0 && !warned) {
		warned = true;
		NKV_WARN("cannot notify the service manager ($NOTIFY_SOCKET): %s", strerror(-rc));
	}
#else
	(void)fmt;
#endif
}

void daemon_notify_reloading(const char *status)
{
	struct timespec ts;

	/* systemd 253 and later match a reload by the monotonic time of RELOADING=1 */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	daemon_notify("RELOADING=1\nMONOTONIC_USEC=%" PRIu64 "\nSTATUS=%s", (uint64_t)ts.tv_sec * 1000000u +
		      (uint64_t)ts.tv_nsec / 1000u, status);
}
