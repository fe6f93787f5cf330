/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fdpass.h - one message with at most one file descriptor over a Unix socket (SCM_RIGHTS), as the
 * shared-memory transport's control protocol uses it on both sides.
 */
#ifndef NKV_FDPASS_H
#define NKV_FDPASS_H

#include <stddef.h>
#include <sys/types.h>

/** Send @len bytes as one message, with @fd attached when >= 0. @return bytes sent, or -errno. */
ssize_t nkv_send_fd(int sock, const void *buf, size_t len, int fd);

/** nkv_send_fd() with sendmsg flags @flags besides MSG_NOSIGNAL (MSG_DONTWAIT...); on a stream
 *  socket it may send less than @len (the descriptor goes with the first byte sent). */
ssize_t nkv_send_fd_flags(int sock, const void *buf, size_t len, int fd, int flags);

/**
 * Receive one message into @buf (@cap bytes). The first descriptor attached goes to *@fd (-1 if
 * none; always -1 when @fd is NULL); any other is closed. @flags: recvmsg flags (MSG_DONTWAIT...).
 * @return bytes received, 0 at end of stream or for an empty message (whose descriptors are closed),
 * -EMSGSIZE when the message or its descriptors were truncated (nothing is kept), or -errno.
 */
ssize_t nkv_recv_fd(int sock, void *buf, size_t cap, int *fd, int flags);

#endif
