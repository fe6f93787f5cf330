/* SPDX-License-Identifier: Apache-2.0 */
/*
 * daemon_spawn.h - start a rados-nkv daemon as a child, wait until its NVMe/TCP port accepts, stop it
 * and check that it exited cleanly: what the raw-socket tests (tcp_proto.c, tcp_abuse.c) do around
 * their cases. The command line stays with each test; only the process handling is shared.
 */
#ifndef NKV_TEST_DAEMON_SPAWN_H
#define NKV_TEST_DAEMON_SPAWN_H

#include <stdbool.h>
#include <sys/types.h>

/**
 * Fork and exec @argv[0] with @argv (NULL-terminated). In the child, @child_setup(@arg) runs first
 * when not NULL (environment, rlimits). Stdio is flushed before the fork so nothing is printed twice;
 * a failed exec says why on stderr and exits 127. @return the child's pid, or -1 if fork failed.
 */
pid_t daemon_spawn(const char *const argv[], void (*child_setup)(void *arg), void *arg);

/**
 * Wait up to 10 s (200 tries, 50 ms apart) until 127.0.0.1:@port accepts a TCP connection. A daemon
 * that exits meanwhile is reaped and its status said on stderr. @return true once the port accepts.
 */
bool daemon_wait_port(pid_t pid, int port);

/**
 * SIGTERM, then the daemon must exit with status 0 within @secs seconds: one CHECK either way (a
 * nonzero status is usually a sanitizer report above it). Past @secs it is SIGKILLed and reaped.
 */
void daemon_stop(pid_t pid, int secs);

/** A TCP port on 127.0.0.1 the kernel says is free now (a fixed or pid-derived one can sit in the
 *  ephemeral range, where other tests' connections in TIME_WAIT make the daemon's bind fail).
 *  @return the port, or 0. */
unsigned daemon_free_port(void);

/**
 * SIGSTOP @pid and wait up to 3 s until every one of its threads is stopped. kill() returns once one
 * thread has been told; the others run on until that thread gets a CPU and starts the group stop, so
 * on a loaded machine a command sent right after kill() can still be taken and run.
 * @return whether all stopped in time.
 */
bool daemon_freeze(pid_t pid);

#endif
