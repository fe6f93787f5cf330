/*
 * rados_wop.h - the write op of a Store or Delete, built with librados' C++ API (rados_wop.cc).
 *
 * Why not the C API: rados_write_op_write_full() copies the value into a fresh buffer before the
 * op is sent, and at large values that copy was the gateway's largest single cost (perf of 4 MiB
 * Stores at QD 16: 23 % of the daemon's CPU in memmove). The C++ API takes a bufferlist, which can
 * refer to memory it does not own: nkv_wval_take() hands a request buffer to librados and
 * nkv_wop_write_full() adds a reference to it, so the value goes from the socket buffer it was
 * received into straight to the OSD's socket.
 *
 * Whose memory: a taken buffer is freed (free()) by whoever drops the last reference: the I/O
 * (nkv_wval_put() when it completes) or librados, which may keep a message after the op ended: an
 * op cancelled at its deadline may still sit in a connection's send queue. A buffer it could still
 * send is never freed or reused under it, which a borrowed (static) buffer could not promise.
 *
 * Every function is called from one thread at a time per op; all are C-callable.
 */
#ifndef NKV_RADOS_WOP_H
#define NKV_RADOS_WOP_H

#include <rados/librados.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

struct nkv_wop;  /* one compound write op */
struct nkv_wval; /* a value buffer owned by librados' reference counting */

/** A new, empty write op. @return NULL when out of memory. */
struct nkv_wop *nkv_wop_new(void);
/** Release @op (built, submitted or not; librados keeps what a submitted op still needs). */
void nkv_wop_free(struct nkv_wop *op);
/** Fail the op with -ECANCELED unless xattr @name equals @val (@len bytes). */
void nkv_wop_cmpxattr_eq(struct nkv_wop *op, const char *name, const void *val, size_t len);
/** Create the object; fail with -EEXIST when it exists. */
void nkv_wop_create_excl(struct nkv_wop *op);
/** Fail with -ENOENT unless the object exists. */
void nkv_wop_assert_exists(struct nkv_wop *op);
/** Remove the object. */
void nkv_wop_remove(struct nkv_wop *op);
/** Set xattr @name to @val (@len bytes, copied). */
void nkv_wop_setxattr(struct nkv_wop *op, const char *name, const void *val, size_t len);
/**
 * Replace the object's data with @len bytes: those of @val (a reference, no copy) when @val is not
 * NULL, else a copy of @buf.
 */
void nkv_wop_write_full(struct nkv_wop *op, struct nkv_wval *val, const void *buf, size_t len);
/**
 * Submit @op on object @oid of @ioctx; @c (a C completion) fires when it ends. @flags: LIBRADOS_OPERATION_*.
 * @return 0 or -errno (nothing submitted).
 */
int nkv_wop_operate(struct nkv_wop *op, rados_ioctx_t ioctx, const char *oid, rados_completion_t c, int flags);

/**
 * Hand @buf (from malloc(), @len bytes) to librados: from now on it is freed by the last of the
 * returned reference and librados' own. @return the reference, or NULL (out of memory, or @len
 * past what a bufferlist holds), in which case @buf is still the caller's.
 */
struct nkv_wval *nkv_wval_take(void *buf, size_t len);
/** Drop the I/O's reference (NULL: nothing). */
void nkv_wval_put(struct nkv_wval *v);

#ifdef __cplusplus
}
#endif
#endif
