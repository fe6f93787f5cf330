/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nixl_log_compat.cpp - the plugin's own common/nixl_log.h (plugin/compat), which stands in for
 * NIXL's Abseil-based one when the plugin is compiled: every macro NIXL defines is there and is used
 * here the way NIXL's headers use them (a stream after the macro, inside a template, in a
 * condition), with the project's warnings as errors; lines reach stderr at the levels NIXL logs
 * by default (debug and trace stay off), the P* forms append errno's text, and a failed
 * NIXL_ASSERT_ALWAYS or NIXL_FATAL aborts.
 */
#include "common/nixl_log.h"

#include <csignal>
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

namespace {

int failures;

void check(bool ok, const char *what)
{
	if (!ok) {
		std::fprintf(stdout, "FAIL: %s\n", what);
		failures++;
	}
}

// As backend_plugin.h's nixlBackendPluginCreator: the macro inside a template's catch block.
template <typename T> int create()
{
	try {
		throw std::runtime_error("no engine");
	} catch (const std::exception &e) {
		NIXL_ERROR << "Failed to create engine: " << e.what();
		return -1;
	}
}

// As backend_aux.h's nixlStrideDescList::find: an assertion on a parameter.
int find(int run_size)
{
	NIXL_ASSERT(run_size > 0);
	return run_size;
}

// Runs fn with stderr sent to a file; returns what it wrote, or "signal N" when it died of one.
template <typename F> std::string captured(F fn)
{
	char path[] = "/tmp/nixl_log_compat.XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0)
		return "mkstemp failed";
	pid_t pid = fork();
	if (pid == 0) {
		dup2(fd, 2);
		fn();
		_exit(0);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	std::string out;
	char buf[512];
	ssize_t n;
	lseek(fd, 0, SEEK_SET);
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		out.append(buf, (size_t)n);
	close(fd);
	unlink(path);
	if (WIFSIGNALED(st))
		out += "signal " + std::to_string(WTERMSIG(st));
	return out;
}

} // namespace

int main()
{
	std::string out = captured([] { create<int>(); });
	check(out == "RADOS_NKV E Failed to create engine: no engine\n", "NIXL_ERROR in a template");

	out = captured([] {
		NIXL_WARN << "w" << 1;
		NIXL_INFO << "i";
		NIXL_DEBUG << "debug is off";
		NIXL_TRACE << "trace is off";
		NIXL_ERROR_FUNC << "x";
	});
	check(out == "RADOS_NKV W w1\nRADOS_NKV I i\nRADOS_NKV E operator(): x\n", "levels and NIXL_ERROR_FUNC");

	out = captured([] {
		errno = ENOENT;
		NIXL_PERROR << "open";
	});
	check(out == "RADOS_NKV E open: " + std::string(std::strerror(ENOENT)) + " [2]\n", "NIXL_PERROR appends errno");

	out = captured([] { NIXL_ASSERT_ALWAYS(find(1) == 2) << "more"; });
	check(out.find("RADOS_NKV F Check failed: find(1) == 2 more\n") == 0 &&
		      out.find("signal " + std::to_string(SIGABRT)) != std::string::npos,
	      "NIXL_ASSERT_ALWAYS aborts");
	check(captured([] { NIXL_ASSERT_ALWAYS(find(3) == 3); }).empty(), "a true NIXL_ASSERT_ALWAYS is silent");

	out = captured([] { NIXL_FATAL << "bye"; });
	check(out == "RADOS_NKV F bye\nsignal " + std::to_string(SIGABRT), "NIXL_FATAL aborts");

	out = captured([] {
		if (find(5) == 5)
			NIXL_ASSERT(true);
		else
			NIXL_ERROR << "dangling else";
	});
	check(out.empty(), "NIXL_ASSERT as the body of an if");
	check(nixl_strerror(ENOENT) == std::strerror(ENOENT), "nixl_strerror");

	std::printf("nixl_log_compat: %s\n", failures ? "FAILED" : "all checks passed");
	return failures ? 1 : 0;
}
