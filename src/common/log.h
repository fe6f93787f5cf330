/* SPDX-License-Identifier: Apache-2.0 */
/*
 * log.h - leveled logging, one format for every line:
 *
 *     2026-05-03T10:11:12.345Z rados-nkv[4242] warn transport: tcp 10.0.0.9:51234: protocol error ...
 *     <UTC ISO-8601, ms>       <origin>[pid]   <level> <component>: <message>
 *
 * The origin is "rados-nkv" for the target (daemon, embedding API) and "libnkv" for the client
 * library, so an application linking libnkv never sees its messages under the daemon's name; it is
 * fixed at compile time per library (NKV_LOG_ORIGIN, set by CMake for libnkv's sources). The
 * component is the source directory of the call ("transport", "core", "backend", "client", ...)
 * unless the file defines NKV_LOG_COMPONENT before including this header.
 *
 * Rate limiting (error/warn/info; debug lines always print, tools parse them): per call site, a line
 * identical to the site's last printed line within NKV_LOG_WINDOW_MS is counted, not printed; at
 * most NKV_LOG_BURST different lines per window print, the rest are counted. When the window ends
 * (checked on every later line and by nkv_log_tick()/nkv_log_flush()) one line reports the count:
 * "... (repeated N times in the last 5 s)" or "... (and N similar messages in the last 5 s)".
 *
 * Lines go to stderr, or to syslog(3) (journald) after nkv_log_to_syslog(). Thread-safe: one
 * mutex orders the lines and the rate-limit table.
 */
#ifndef NKV_LOG_H
#define NKV_LOG_H

enum nkv_log_level {
	NKV_LOG_ERROR, /* something failed that an operator must see */
	NKV_LOG_WARN,  /* degraded or unusual, service continues */
	NKV_LOG_INFO,  /* lifecycle: connects, subsystems, shutdown */
	NKV_LOG_DEBUG, /* per-command detail */
};

#define NKV_LOG_WINDOW_MS 5000 /* rate-limit window of one call site */
#define NKV_LOG_BURST 10       /* different lines one call site may print per window */

#ifndef NKV_LOG_ORIGIN
#define NKV_LOG_ORIGIN "rados-nkv"
#endif
#ifndef NKV_LOG_COMPONENT
#define NKV_LOG_COMPONENT NULL /* NULL: the directory of __FILE__ */
#endif

/** Set the most verbose level printed (default: NKV_LOG_WARN, or $NKV_LOG_LEVEL 0-3). Any thread. */
void nkv_log_set_level(enum nkv_log_level lvl);

/** The level's name as flags and files spell it ("error", "warn", "info", "debug"). */
const char *nkv_log_level_name(enum nkv_log_level lvl);

/** Would a line at @lvl print? For callers that build expensive messages. Any thread. */
int nkv_log_enabled(enum nkv_log_level lvl);

/**
 * Send lines to syslog(3) with identity @ident (LOG_DAEMON facility, pid included) instead of stderr;
 * the level becomes the syslog priority. Call once, before threads log. @ident must stay valid.
 */
void nkv_log_to_syslog(const char *ident);

/** Print the counts of rate-limit windows that have ended (a periodic caller bounds their delay). */
void nkv_log_tick(void);

/** Print every pending count now, ended windows or not (before exit). */
void nkv_log_flush(void);

/**
 * Log one line; use the NKV_ERR/WARN/INFO/DEBUG macros, which pass the origin, the component (NULL:
 * derived from @file) and the call site: the address of @fmt keys the rate limiting.
 */
void nkv_log_at(const char *origin, const char *component, const char *file, enum nkv_log_level lvl,
		const char *fmt, ...) __attribute__((format(printf, 5, 6)));

#define NKV_LOG_AT(lvl, ...) nkv_log_at(NKV_LOG_ORIGIN, NKV_LOG_COMPONENT, __FILE__, lvl, __VA_ARGS__)
#define NKV_ERR(...) NKV_LOG_AT(NKV_LOG_ERROR, __VA_ARGS__)
#define NKV_WARN(...) NKV_LOG_AT(NKV_LOG_WARN, __VA_ARGS__)
#define NKV_INFO(...) NKV_LOG_AT(NKV_LOG_INFO, __VA_ARGS__)
#define NKV_DEBUG(...) NKV_LOG_AT(NKV_LOG_DEBUG, __VA_ARGS__)

#endif
