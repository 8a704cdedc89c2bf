// Large buffers freed by a daemon stay mapped for its next ones.
//
// glibc returns freed memory to the kernel eagerly: a chunk at the top of an arena past
// the trim threshold is given back (and per-thread arenas shrink the same way), and
// large chunks may be mmap'd and munmap'd one by one. A daemon that churns payload-sized
// buffers -- the OSD's memory store replaces a 4 MiB payload on every overwrite, one
// thread allocating and others freeing -- then pays a page fault and a page zeroing per
// 4 KiB of every new payload, in the kernel, on top of the copy itself. In a virtual
// machine each such fault can also be a fault of the host.
//
// KeepFreedMemoryForReuse() raises glibc's mmap threshold to its maximum (32 MiB: a ring
// record's payload is at most 16 MiB) and its trim threshold to 1 GiB, so freed buffers
// are reused from the heap without new faults; a process then keeps up to that much freed
// memory mapped instead of returning it at once (a memory-mode OSD's store is capped at
// an eighth of RAM anyway). Measured (docs/BENCHMARKS.md "Session 29"): size-3 memory
// cluster, rdma, 4 MiB -t 16, 256 objects: 2,400-3,100 -> 900 minor faults per write on
// the OSDs, 560-710 -> 990-1,030 MiB/s.
//
// Call it first thing in main(), before threads start. A no-op under sanitizers that
// bring their own allocator.
#ifndef MSGR_MSG_BASE_MALLOC_POLICY_H_
#define MSGR_MSG_BASE_MALLOC_POLICY_H_

namespace msgr {

void KeepFreedMemoryForReuse();

}  // namespace msgr

#endif  // MSGR_MSG_BASE_MALLOC_POLICY_H_
