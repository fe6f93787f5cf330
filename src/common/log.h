/* log.h - leveled logging to stderr. Thread-safe (one fprintf per line). */
#ifndef NKV_LOG_H
#define NKV_LOG_H

enum nkv_log_level {
	NKV_LOG_ERROR, /* something failed that an operator must see */
	NKV_LOG_WARN,  /* degraded or unusual, service continues */
	NKV_LOG_INFO,  /* lifecycle: connects, subsystems, shutdown */
	NKV_LOG_DEBUG, /* per-command detail */
};

/** Set the most verbose level printed (default: NKV_LOG_WARN, or $NKV_LOG_LEVEL 0-3). */
void nkv_log_set_level(enum nkv_log_level lvl);

void nkv_log(enum nkv_log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define NKV_ERR(...) nkv_log(NKV_LOG_ERROR, __VA_ARGS__)
#define NKV_WARN(...) nkv_log(NKV_LOG_WARN, __VA_ARGS__)
#define NKV_INFO(...) nkv_log(NKV_LOG_INFO, __VA_ARGS__)
#define NKV_DEBUG(...) nkv_log(NKV_LOG_DEBUG, __VA_ARGS__)

#endif
