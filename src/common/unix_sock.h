/* SPDX-License-Identifier: Apache-2.0 */
/*
 * unix_sock.h - Unix socket files created race-free (the control plane's socket, the shared-memory
 * transport's), the daemon's runtime directory, and who is on the other end of a connection.
 *
 * A socket file's mode and group are set on the inode the daemon bound, before its name is
 * visible: it is bound in a private directory made next to its path (0700, the daemon's), its mode
 * and group set there by name (no one else can replace a name in that directory), then renamed onto
 * its path. chmod/chown on the final path would follow whatever another user put there meanwhile (a
 * link to /etc/shadow).
 */
#ifndef NKV_COMMON_UNIX_SOCK_H
#define NKV_COMMON_UNIX_SOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

/**
 * Listen on Unix socket @path (@type: SOCK_STREAM or SOCK_SEQPACKET, may carry SOCK_NONBLOCK; the fd
 * is always close-on-exec) with backlog @backlog; its file gets @mode and, when @gid is not
 * (gid_t)-1, group @gid, before @path names it. A stale socket at @path (nobody answers) is replaced;
 * a live one is not, nor anything that is not a socket (a link included). @st (may be NULL): the
 * socket file's identity, for removing it later only if it is still ours.
 * @return the listening fd, or -EADDRINUSE (live socket there), -EEXIST (not a socket),
 * -ENAMETOOLONG, -EPERM (the private directory was tampered with), -errno.
 */
int nkv_unix_listen(const char *path, int type, int backlog, mode_t mode, gid_t gid, struct stat *st);

/** Unlink @path if it is still the file @st names (a successor's socket is left alone). */
void nkv_unix_unlink_if(const char *path, const struct stat *st);

/**
 * Check that directory @dir is safe to hold sockets the daemon makes: not a symbolic link, owned
 * by this process's user or root, and writable by no one else (no other user can rename, replace
 * or remove what is in it). With @create, a missing @dir (not its parents) is made with @mode.
 * @return 0, or -errno with the reason in @why (@len bytes).
 */
int nkv_dir_check_private(const char *dir, bool create, mode_t mode, char *why, size_t len);

/**
 * The default runtime directory: /run/rados-nkv for root, else $XDG_RUNTIME_DIR/rados-nkv, else
 * /tmp/rados-nkv-UID. Into @out (@len bytes). @return 0 or -ENAMETOOLONG.
 */
int nkv_run_dir_default(char *out, size_t len);

/** The name of the control socket in a runtime directory ("control.sock"). */
#define NKV_CONTROL_SOCKET "control.sock"

/**
 * Who may use a local socket: this process's user, root, and (when @gid is not (gid_t)-1) members
 * of group @gid (primary or supplementary, as the peer had them when it connected). @fd: a
 * connected Unix socket. @return true if allowed; the peer's uid and pid into @uid, @pid.
 */
bool nkv_peer_allowed(int fd, gid_t gid, uid_t *uid, pid_t *pid);

#endif
