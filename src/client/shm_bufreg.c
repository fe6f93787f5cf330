/* SPDX-License-Identifier: Apache-2.0 */
/*
 * shm_bufreg.c - nkv_buf_register() over shared memory: the caller's memory becomes registered in
 * place. The controller can only reach memory passed to it as a sealed memfd, and the caller's
 * memory (a tensor arena, a numpy array) is anonymous memory someone else allocated. So its whole
 * pages are copied (those holding data: see copy_touched) into a new memfd mapped shared, and that mapping is moved onto the same
 * addresses with mremap(MREMAP_FIXED), which replaces the old pages in one step: the caller keeps
 * its pointers and its bytes, and the controller gets the memfd.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "client/shm_int.h"
#include "common/log.h"

#define PG 4096u

/**
 * Is [@start, @end) all private anonymous memory (what malloc and MAP_PRIVATE|MAP_ANONYMOUS give)?
 * A file mapping or shared memory cannot be swapped for a memfd without changing what it is.
 */
static bool anon_private(uintptr_t start, uintptr_t end)
{
	FILE *f = fopen("/proc/self/maps", "re");
	if (!f)
		return false;
	char line[512];
	uintptr_t covered = start;
	bool ok = true;
	while (ok && covered < end && fgets(line, sizeof(line), f)) {
		uintptr_t lo, hi;
		char perms[8] = "";
		unsigned long long off, inode;
		char dev[16] = "", path[256] = "";
		int n = sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %7s %llx %15s %llu %255s", &lo, &hi, perms, &off, dev,
			       &inode, path);
		if (n < 6 || hi <= covered || lo >= end)
			continue;
		if (lo > covered) /* a hole */
			ok = false;
		else if (perms[3] != 'p' || inode != 0 || (path[0] && strcmp(path, "[heap]")) || perms[0] != 'r' ||
			 perms[1] != 'w')
			ok = false;
		covered = hi;
	}
	fclose(f);
	return ok && covered >= end;
}

/*
 * Copy the pages of [@src, @src + @n) that hold data into @dst (the new memfd, all zeros). A page
 * never touched (neither present nor swapped out, per /proc/self/pagemap) reads as zeros anyway:
 * skipping those makes registering a fresh arena nearly free. Without pagemap, copy everything.
 */
static void copy_touched(uint8_t *dst, const uint8_t *src, size_t n)
{
	int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	size_t npg = n / PG;
	uint64_t ent[512];
	for (size_t i = 0; i < npg;) {
		size_t k = npg - i < 512 ? npg - i : 512;
		off_t at = (off_t)(((uintptr_t)src / PG + i) * sizeof(uint64_t));
		if (fd < 0 || pread(fd, ent, k * sizeof(uint64_t), at) != (ssize_t)(k * sizeof(uint64_t))) {
			memcpy(dst + i * PG, src + i * PG, (npg - i) * PG);
			break;
		}
		for (size_t j = 0; j < k;) { /* runs of pages with data, one memcpy each */
			size_t e = j;
			while (e < k && (ent[e] & (3ull << 62)))
				e++;
			if (e > j)
				memcpy(dst + (i + j) * PG, src + (i + j) * PG, (e - j) * PG);
			j = e + 1;
		}
		i += k;
	}
	if (fd >= 0)
		close(fd);
}

int nkv_shm_buf_register(struct nkv_ctrl *ctrl, void *addr, size_t len)
{
	struct nkv_shm_ctrl *s = ctrl->shm;
	uintptr_t a = (uintptr_t)addr;
	if (a + len < a)
		return -EINVAL;
	uintptr_t start = (a + PG - 1) & ~(uintptr_t)(PG - 1), end = (a + len) & ~(uintptr_t)(PG - 1);
	size_t n = end > start ? end - start : 0;
	struct nkv_shm_buf *b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	b->va = (uint8_t *)start;
	b->len = n;
	b->user = addr;
	b->fd = -1;
	int rc = 0;
	pthread_rwlock_wrlock(&s->buf_lock);
	for (struct nkv_shm_buf *o = s->bufs; o; o = o->next)
		if ((o->user == addr && o->user) || (n && o->len && (uint8_t *)start < o->va + o->len &&
						      o->va < (uint8_t *)end))
			rc = -EEXIST;
	if (rc == 0 && n && !anon_private(start, end))
		rc = -EINVAL;
	if (rc == 0 && n) {
		b->fd = nkv_shm_memfd("nkv-user", n);
		rc = b->fd < 0 ? b->fd : 0;
	}
	if (rc == 0 && n) {
		void *m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, b->fd, 0);
		if (m == MAP_FAILED) {
			rc = -errno;
		} else {
			copy_touched(m, (const uint8_t *)start, n);
			if (mremap(m, n, n, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)start) == MAP_FAILED) {
				rc = -errno;
				munmap(m, n);
			}
		}
	}
	if (rc == 0 && n) {
		/* From here the memory is the memfd's whatever the controller answers: same bytes. */
		b->iova = nkv_shm_iova_alloc(s, n);
		rc = nkv_shm_reg(ctrl, b->fd, 0, n, b->iova, 0);
	}
	if (rc == 0) {
		b->next = s->bufs;
		s->bufs = b;
	}
	pthread_rwlock_unlock(&s->buf_lock);
	if (rc) {
		NKV_DEBUG("nkv_buf_register(%p, %zu): %s", addr, len, strerror(-rc));
		if (b->fd >= 0)
			close(b->fd);
		free(b);
	}
	return rc;
}

int nkv_shm_buf_unregister(struct nkv_ctrl *ctrl, void *addr)
{
	struct nkv_shm_ctrl *s = ctrl->shm;
	int rc = -ENOENT;
	pthread_rwlock_wrlock(&s->buf_lock);
	for (struct nkv_shm_buf **pp = &s->bufs; *pp; pp = &(*pp)->next) {
		struct nkv_shm_buf *b = *pp;
		if (b->user != addr)
			continue;
		rc = b->len ? nkv_shm_dereg(ctrl, b->iova, b->len) : 0;
		/* Only a controller that still uses the region keeps it (-EBUSY). One that is gone (a lost
		 * socket), or does not know it, holds nothing: the entry goes, else a later mapping at
		 * these addresses would be taken for this memfd, and a reconnect would register it again. */
		if (rc && rc != -EBUSY) {
			NKV_DEBUG("nkv_buf_unregister(%p): DEREG: %s; forgotten here", addr, strerror(-rc));
			rc = 0;
		}
		if (rc == 0) {
			*pp = b->next;
			if (b->fd >= 0)
				close(b->fd); /* the mapping keeps the memory */
			free(b);
		}
		break;
	}
	pthread_rwlock_unlock(&s->buf_lock);
	return rc;
}
