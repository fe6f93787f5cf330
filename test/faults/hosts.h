/* SPDX-License-Identifier: Apache-2.0 */
/* hosts.h - hosts that vanish mid-transfer, for the fault suite's "host" scenario (hosts.c). */
#ifndef NKV_TEST_FAULTS_HOSTS_H
#define NKV_TEST_FAULTS_HOSTS_H

#include <stdbool.h>
#include <stdint.h>

/**
 * A raw NVMe/TCP host at @addr:@port: admin queue, CC.EN, I/O queue 1, then a Store of @len bytes of
 * @val under @key (16 bytes) through R2T, of which it sends whole H2CData PDUs up to about half of
 * the value and then half of one more PDU; then it resets both connections (@rst: SO_LINGER 0) or
 * closes them. @return the data bytes sent, or -1 when a step before the data failed (@why said).
 */
int raw_half_store(const char *addr, const char *port, const uint8_t key[16], const uint8_t *val, uint32_t len,
		   bool rst, char why[128]);

/**
 * The shared-memory host process: connect to @sock, register @nreads x @len bytes (nkv_buf_alloc:
 * the target writes into them directly), queue @nreads Retrieves of the keys key_base + i % @nkeys
 * into them with one doorbell, write one byte to @ready_fd, and poll until killed. @return 1 on a
 * failure before that (said on stderr); never returns otherwise.
 */
int shm_child_main(const char *sock, uint64_t key_base, unsigned nkeys, uint32_t len, unsigned nreads, int ready_fd);

#endif
