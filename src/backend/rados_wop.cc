// rados_wop.cc - Store and Delete write ops in librados' C++ API, for values sent without a copy.
// See rados_wop.h. The C side keeps everything else (completions, I/O contexts, read ops): this file
// only builds and submits the write op, and owns nothing past the calls below.
#include "rados_wop.h"

#include <cerrno>
#include <climits>
#include <new>
#include <rados/librados.hpp>

struct nkv_wop {
	librados::ObjectWriteOperation op;
};

struct nkv_wval {
	ceph::bufferptr ptr;
};

static ceph::bufferlist copy_of(const void *p, size_t len)
{
	ceph::bufferlist bl;
	bl.append(static_cast<const char *>(p), len);
	return bl;
}

extern "C" {

struct nkv_wop *nkv_wop_new(void)
{
	return new (std::nothrow) nkv_wop;
}

void nkv_wop_free(struct nkv_wop *op)
{
	delete op;
}

void nkv_wop_cmpxattr_eq(struct nkv_wop *op, const char *name, const void *val, size_t len)
{
	op->op.cmpxattr(name, LIBRADOS_CMPXATTR_OP_EQ, copy_of(val, len));
}

void nkv_wop_create_excl(struct nkv_wop *op)
{
	op->op.create(true);
}

void nkv_wop_assert_exists(struct nkv_wop *op)
{
	op->op.assert_exists();
}

void nkv_wop_remove(struct nkv_wop *op)
{
	op->op.remove();
}

void nkv_wop_setxattr(struct nkv_wop *op, const char *name, const void *val, size_t len)
{
	op->op.setxattr(name, copy_of(val, len));
}

void nkv_wop_write_full(struct nkv_wop *op, struct nkv_wval *val, const void *buf, size_t len)
{
	ceph::bufferlist bl;
	if (val)
		bl.append(val->ptr); // another reference to the same memory
	else
		bl.append(static_cast<const char *>(buf), len);
	op->op.write_full(bl);
}

int nkv_wop_operate(struct nkv_wop *op, rados_ioctx_t ioctx, const char *oid, rados_completion_t c, int flags)
{
	librados::IoCtx io;
	librados::IoCtx::from_rados_ioctx_t(ioctx, io); // a reference, dropped when io goes
	// The C completion seen through the C++ type: the wrapper is only a pointer to the same
	// AioCompletionImpl, and its destructor would release that completion, which is the C side's
	// to release; so it lives in storage that is never destroyed.
	alignas(librados::AioCompletion) unsigned char mem[sizeof(librados::AioCompletion)];
	auto *comp = new (mem) librados::AioCompletion(static_cast<librados::AioCompletionImpl *>(c));
	try {
		return io.aio_operate(oid, comp, &op->op, flags);
	} catch (const std::bad_alloc &) {
		return -ENOMEM;
	}
}

struct nkv_wval *nkv_wval_take(void *buf, size_t len)
{
	if (len > UINT_MAX) // a raw buffer's length is an unsigned
		return nullptr;
	auto *v = new (std::nothrow) nkv_wval;
	if (!v)
		return nullptr;
	try {
		// claim_malloc: the raw buffer frees @buf with free() when its last reference goes. If
		// allocating the raw throws, it never took @buf.
		v->ptr = ceph::bufferptr(ceph::buffer::claim_malloc(static_cast<unsigned>(len), static_cast<char *>(buf)));
	} catch (const std::bad_alloc &) {
		delete v;
		return nullptr;
	}
	return v;
}

void nkv_wval_put(struct nkv_wval *v)
{
	delete v;
}

} // extern "C"
