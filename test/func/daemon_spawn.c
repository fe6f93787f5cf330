/* SPDX-License-Identifier: Apache-2.0 */
/* daemon_spawn.c - a rados-nkv daemon as a child process of a test (see daemon_spawn.h). */
#include "daemon_spawn.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

#define POLL_US 50000 /* between two looks at the child: short next to the bounds, cheap on 2 cores */

pid_t daemon_spawn(const char *const argv[], void (*child_setup)(void *arg), void *arg)
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		if (child_setup)
			child_setup(arg);
		execv(argv[0], (char *const *)argv); /* execv never writes argv; its prototype predates const */
		perror("execv");
		_exit(127);
	}
	return pid;
}

/** Does 127.0.0.1:@port accept a connection now? */
static bool port_accepts(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	bool ok;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
	if (fd >= 0)
		close(fd);
	return ok;
}

bool daemon_wait_port(pid_t pid, int port)
{
	for (int i = 0; i < 200 && pid > 0; i++) {
		int status;
		if (waitpid(pid, &status, WNOHANG) == pid) {
			fprintf(stderr, "daemon exited early (status %#x)\n", status);
			return false;
		}
		if (port_accepts(port))
			return true;
		usleep(POLL_US);
	}
	return false;
}

void daemon_stop(pid_t pid, int secs)
{
	int status = 0;

	kill(pid, SIGTERM);
	for (int i = 0; i < secs * (1000000 / POLL_US); i++) {
		if (waitpid(pid, &status, WNOHANG) == pid) {
			CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			      "daemon exit status %#x after SIGTERM (ASan reports above)", status);
			return;
		}
		usleep(POLL_US);
	}
	CHECK(0, "daemon did not exit within %d s of SIGTERM", secs);
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
}

unsigned daemon_free_port(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	unsigned p = 0;
	if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		p = ntohs(a.sin_port);
	if (fd >= 0)
		close(fd);
	return p;
}

bool daemon_freeze(pid_t pid)
{
	char dir[64];
	snprintf(dir, sizeof(dir), "/proc/%d/task", (int)pid);
	kill(pid, SIGSTOP);
	for (int tries = 0; tries < 600; tries++, usleep(5000)) {
		DIR *d = opendir(dir);
		struct dirent *de;
		bool all = d != NULL;
		while (all && (de = readdir(d))) {
			char path[400], buf[512];
			if (de->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "%s/%s/stat", dir, de->d_name);
			FILE *f = fopen(path, "r");
			size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
			if (f)
				fclose(f);
			buf[n] = 0;
			const char *st = strrchr(buf, ')'); /* "pid (comm) S ...": comm may hold spaces */
			if (st && st[1] == ' ' && st[2] != 'T' && st[2] != 't')
				all = false;
		}
		if (d)
			closedir(d);
		if (all)
			return true;
	}
	fprintf(stderr, "daemon_freeze: pid %d did not stop within 3 s\n", (int)pid);
	return false;
}
