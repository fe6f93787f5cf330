/* SPDX-License-Identifier: Apache-2.0 */
/* fdpass.c - a message and one file descriptor over a Unix socket (see fdpass.h). */
#include "fdpass.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

ssize_t nkv_send_fd(int sock, const void *buf, size_t len, int fd)
{
	return nkv_send_fd_flags(sock, buf, len, fd, 0);
}

ssize_t nkv_send_fd_flags(int sock, const void *buf, size_t len, int fd, int flags)
{
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} cm;
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};

	if (fd >= 0) {
		memset(&cm, 0, sizeof(cm));
		mh.msg_control = cm.b;
		mh.msg_controllen = sizeof(cm.b);
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	ssize_t n = sendmsg(sock, &mh, MSG_NOSIGNAL | flags);
	return n < 0 ? -errno : n;
}

ssize_t nkv_recv_fd(int sock, void *buf, size_t cap, int *fd, int flags)
{
	union {
		char b[CMSG_SPACE(4 * sizeof(int))];
		struct cmsghdr align;
	} cm;
	struct iovec iov = {.iov_base = buf, .iov_len = cap};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.b, .msg_controllen = sizeof(cm.b)};
	ssize_t n = recvmsg(sock, &mh, flags | MSG_CMSG_CLOEXEC);
	int got = -1;

	if (fd)
		*fd = -1;
	if (n < 0)
		return -errno;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
			int f;
			memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (got < 0 && fd)
				got = f;
			else
				close(f); /* one descriptor per message is meaningful */
		}
	}
	/* An empty message reads as the end of the stream (0), which every caller takes as the peer
	 * leaving without looking at *fd: a descriptor sent with one must be closed here, or each such
	 * message would leak one (a host could run the target out of descriptors). */
	if (n == 0 || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
		if (got >= 0)
			close(got);
		return n == 0 ? 0 : -EMSGSIZE;
	}
	if (fd)
		*fd = got;
	return n;
}
