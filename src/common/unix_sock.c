/* SPDX-License-Identifier: Apache-2.0 */
/* unix_sock.c - Unix socket files created race-free, the runtime directory, peer checks (unix_sock.h). */
#include "common/unix_sock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* "/proc/self/fd/N/NAME": a name inside the directory open as fd N, whatever its path is now. */
static int fd_path(struct sockaddr_un *sa, int dfd, const char *name)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	int n = snprintf(sa->sun_path, sizeof(sa->sun_path), "/proc/self/fd/%d/%s", dfd, name);
	return n < 0 || (size_t)n >= sizeof(sa->sun_path) ? -ENAMETOOLONG : 0;
}

/* Is the socket @name in directory @dfd live? @return 0 (absent or stale), -EADDRINUSE, -EEXIST
 * (not a socket), -errno. */
static int probe(int dfd, const char *name, int type)
{
	struct stat st;
	struct sockaddr_un sa;

	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode))
		return -EEXIST;
	int rc = fd_path(&sa, dfd, name);
	if (rc < 0)
		return rc;
	int fd = socket(AF_UNIX, (type & ~SOCK_NONBLOCK) | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 || errno == EAGAIN || errno == EINPROGRESS
		     ? -EADDRINUSE
	     : errno == ECONNREFUSED || errno == ENOENT ? 0
							 : -errno;
	close(fd);
	return rc;
}

int nkv_unix_listen(const char *path, int type, int backlog, mode_t mode, gid_t gid, struct stat *st)
{
	static atomic_uint seq;
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)], stage[64] = "";
	const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
	struct sockaddr_un sa;
	struct stat sst;
	int dfd = -1, sfd = -1, fd = -1, rc;

	if (strlen(path) >= sizeof(dir))
		return -ENAMETOOLONG;
	if (!*base || strcmp(base, ".") == 0 || strcmp(base, "..") == 0)
		return -EINVAL;
	snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash == path ? 1 : slash - path) : 1, slash ? path : ".");
	if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return -errno;
	if ((rc = probe(dfd, base, type)) < 0)
		goto out;
	/* The private directory: made by us, 0700; checked after opening it without following a link,
	 * so one renamed into its place is noticed. */
	for (int i = 0;; i++) {
		snprintf(stage, sizeof(stage), ".nkv-sock.%ld.%u", (long)getpid(), atomic_fetch_add(&seq, 1));
		if (mkdirat(dfd, stage, 0700) == 0)
			break;
		if (errno != EEXIST || i == 100) {
			rc = -errno;
			stage[0] = '\0'; /* not ours: never removed */
			goto out;
		}
	}
	if ((sfd = openat(dfd, stage, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 || fstat(sfd, &sst) < 0) {
		rc = errno == ELOOP || errno == ENOTDIR ? -EPERM : -errno;
		goto out;
	}
	if (sst.st_uid != geteuid() || (sst.st_mode & 0777) != 0700) {
		rc = -EPERM;
		goto out;
	}
	if ((rc = fd_path(&sa, sfd, "s")) < 0)
		goto out;
	if ((fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0)) < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    (gid != (gid_t)-1 && fchownat(sfd, "s", (uid_t)-1, gid, AT_SYMLINK_NOFOLLOW) < 0) ||
	    fchmodat(sfd, "s", mode, 0) < 0 || fstatat(sfd, "s", &sst, AT_SYMLINK_NOFOLLOW) < 0 ||
	    listen(fd, backlog) < 0 || renameat(sfd, "s", dfd, base) < 0) {
		rc = -errno;
		goto out;
	}
	if (st)
		*st = sst;
	rc = fd;
	fd = -1;
out:
	if (sfd >= 0) {
		unlinkat(sfd, "s", 0); /* left only on failure */
		close(sfd);
	}
	if (*stage)
		unlinkat(dfd, stage, AT_REMOVEDIR);
	if (fd >= 0)
		close(fd);
	close(dfd);
	return rc;
}

void nkv_unix_unlink_if(const char *path, const struct stat *st)
{
	struct stat now;
	if (path && st && lstat(path, &now) == 0 && now.st_dev == st->st_dev && now.st_ino == st->st_ino)
		unlink(path);
}

int nkv_dir_check_private(const char *dir, bool create, mode_t mode, char *why, size_t len)
{
	struct stat st;
	int fd, rc = 0;

	if (create && mkdir(dir, mode) < 0 && errno != EEXIST) {
		rc = -errno;
		snprintf(why, len, "cannot create %s: %s", dir, strerror(-rc));
		return rc;
	}
	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		rc = -errno;
		bool link = (rc == -ELOOP || rc == -ENOTDIR) && lstat(dir, &st) == 0 && S_ISLNK(st.st_mode);
		snprintf(why, len, "%s: %s", dir,
			 link ? "is a symbolic link" : rc == -ENOTDIR ? "is not a directory" : strerror(-rc));
		return link ? -ELOOP : rc;
	}
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		snprintf(why, len, "%s: %s", dir, strerror(-rc));
	} else if (st.st_uid != geteuid() && st.st_uid != 0) {
		rc = -EPERM;
		snprintf(why, len, "%s belongs to uid %u, not to this daemon's user (uid %u) or root", dir,
			 (unsigned)st.st_uid, (unsigned)geteuid());
	} else if (st.st_mode & 022) {
		rc = -EPERM;
		snprintf(why, len, "%s is writable by %s (mode %04o): other users could replace what is in it", dir,
			 st.st_mode & 002 ? "every user" : "its group", (unsigned)(st.st_mode & 07777));
	}
	close(fd);
	return rc;
}

int nkv_run_dir_default(char *out, size_t len)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	int n;

	if (geteuid() == 0)
		n = snprintf(out, len, "/run/rados-nkv");
	else if (xdg && *xdg == '/')
		n = snprintf(out, len, "%s/rados-nkv", xdg);
	else
		n = snprintf(out, len, "/tmp/rados-nkv-%u", (unsigned)geteuid());
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

bool nkv_peer_allowed(int fd, gid_t gid, uid_t *uid, pid_t *pid)
{
	struct ucred cr;
	socklen_t l = sizeof(cr);

	*uid = (uid_t)-1;
	*pid = 0;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &l) < 0)
		return false;
	*uid = cr.uid;
	*pid = cr.pid;
	if (cr.uid == 0 || cr.uid == geteuid())
		return true;
	if (gid == (gid_t)-1)
		return false;
	if (cr.gid == gid)
		return true;
	gid_t groups[256];
	l = sizeof(groups);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &l) < 0)
		return false; /* more than 256 groups (ERANGE), or an old kernel: not proven a member */
	for (size_t i = 0; i < l / sizeof(gid_t); i++)
		if (groups[i] == gid)
			return true;
	return false;
}
