/* SPDX-License-Identifier: Apache-2.0 */
/*
 * common/nixl_log.h - the plugin's own version of NIXL's logging header (utils/common/nixl_log.h).
 *
 * NIXL's backend headers include "common/nixl_log.h" (backend_aux.h, backend_plugin.h), and NIXL's
 * version of it includes Abseil's logging headers (absl/log/log.h, check.h, initialize.h). A NIXL
 * built from source whose Abseil came from its meson subproject installs no Abseil headers, and a
 * NIXL wheel installs no headers at all, so the plugin would need an Abseil of NIXL's exact version
 * just to compile. The adapter never logs through these macros: they appear only in header code it
 * does not instantiate (nixlBackendPluginCreator::createEngine, nixlStrideDescList::find). So this
 * header, found before NIXL's on the include path, defines the same macros over stderr and ties the
 * plugin to no Abseil at all. It keeps NIXL's include guard: whichever is seen first wins.
 *
 * The macro set is NIXL's at v1.4.0 (c0a1102b) and at main 8770b655 (unchanged since 237ac842); a
 * NIXL header using a macro missing here fails to compile, it never links against Abseil.
 */
#ifndef __NIXL_LOG_H
#define __NIXL_LOG_H

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <system_error>

namespace rados_nkv_nixl_log {

// One log line: collects what is streamed into it and writes it to stderr when it ends.
class line {
public:
	line(char level, bool fatal, bool on) : level_(level), fatal_(fatal), on_(on || fatal) {}
	line(const line &) = delete;
	line &operator=(const line &) = delete;
	~line()
	{
		if (!on_)
			return;
		if (perror_)
			os_ << ": " << std::strerror(errno_) << " [" << errno_ << "]";
		std::fprintf(stderr, "RADOS_NKV %c %s\n", level_, os_.str().c_str());
		if (fatal_)
			std::abort();
	}
	template <typename T> line &operator<<(const T &v)
	{
		if (on_)
			os_ << v;
		return *this;
	}
	// NIXL's P* macros: append the current errno's text, as Abseil's WithPerror() does.
	line &WithPerror()
	{
		errno_ = errno;
		perror_ = true;
		return *this;
	}

private:
	std::ostringstream os_;
	char level_;
	bool fatal_;
	bool on_;
	bool perror_ = false;
	int errno_ = 0;
};

} // namespace rados_nkv_nixl_log

#define NIXL_FATAL ::rados_nkv_nixl_log::line('F', true, true)
#define NIXL_PFATAL NIXL_FATAL.WithPerror()
#define NIXL_ERROR ::rados_nkv_nixl_log::line('E', false, true)
#define NIXL_PERROR NIXL_ERROR.WithPerror()
#define NIXL_ERROR_FUNC NIXL_ERROR << __FUNCTION__ << ": "
#define NIXL_WARN ::rados_nkv_nixl_log::line('W', false, true)
#define NIXL_PWARN NIXL_WARN.WithPerror()
#define NIXL_INFO ::rados_nkv_nixl_log::line('I', false, true)
#define NIXL_PINFO NIXL_INFO.WithPerror()
// NIXL's debug and trace levels are Abseil's VLOG(1) and DVLOG(2): off unless asked for.
#define NIXL_DEBUG ::rados_nkv_nixl_log::line('D', false, false)
#define NIXL_PDEBUG NIXL_DEBUG.WithPerror()
#define NIXL_TRACE ::rados_nkv_nixl_log::line('T', false, false)
#define NIXL_PTRACE NIXL_TRACE.WithPerror()

// CHECK and DCHECK: a failed condition logs and aborts; more may be streamed after the macro.
#define NIXL_ASSERT_ALWAYS(condition) \
	while (!(condition))          \
	NIXL_FATAL << "Check failed: " #condition " "
#ifdef NDEBUG
#define NIXL_ASSERT(condition)      \
	while (false && !(condition)) \
	NIXL_FATAL << "Check failed: " #condition " "
#else
#define NIXL_ASSERT(condition) NIXL_ASSERT_ALWAYS(condition)
#endif

static inline std::string nixl_strerror(int err)
{
	return std::error_code(err, std::generic_category()).message();
}

#endif /* __NIXL_LOG_H */
