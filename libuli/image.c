// SPDX-License-Identifier: MIT
/*
 * image.c - what libuli needs of the program's ELF image, found through
 * dl_iterate_phdr(): the TLS templates, for the handler's own TLS block,
 * and the executable's segments, to pin (.data, .bss) or to lock (code).
 *
 * The handler's TLS (upcall method).  The kernel runs the handler with
 * the FS base given at registration.  The registering thread's would do
 * only while that thread lives: once it exits, glibc frees or reuses its
 * TLS (and stack), and the handler would run on whatever is there then.
 * So each registration has a block of its own, laid out as glibc lays
 * out a thread's static TLS on x86-64 (TLS variant II: the TCB at the
 * thread pointer, the modules' TLS blocks below it):
 *
 *   tls                                  fsbase (the thread pointer)
 *   | zero | ... module 1's TLS block    | TCB, zero but 4 words |
 *          ^ fsbase - offset(module)      ^ fsbase + ULI_TCB_SIZE
 *
 * Each module with static TLS gets a fresh copy of its PT_TLS image
 * (.tdata copied, .tbss zero) at the offset below the thread pointer it
 * has in every thread: the calling thread's pointer minus the address
 * dl_iterate_phdr() gives of the calling thread's block (dlpi_tls_data),
 * or for the executable, if the C library does not say, roundup(p_memsz,
 * p_align), where glibc and the linker put it (the compiler's local-exec
 * accesses %fs:-offset assume it).  Under static linking, which this
 * project uses, the executable is the only module, libc's errno included;
 * under dynamic linking the libraries loaded at startup have static TLS
 * too (libc's errno), and get their copies the same way.  The TCB has
 * what compiled code and glibc's inline paths read:
 *
 *   0x00  its own address (%fs:0: TLS accessed through a pointer)
 *   0x10  the same (glibc's THREAD_SELF)
 *   0x28  the stack-protector canary (the same in every thread)
 *   0x30  the pointer guard (setjmp/longjmp, atexit mangling)
 *
 * and zero elsewhere: no dynamic thread vector (0x08), so dynamic TLS
 * (a dlopen()ed module's, or general-dynamic access through
 * __tls_get_addr()) is not for handlers: it faults, and aborts the
 * handler.  Nor is the block a glibc thread: no tid, and its rseq area
 * is registered with no kernel; its CPU number says "uninitialized", so
 * that sched_getcpu() asks the vDSO (RDPID or the CPU's segment limit),
 * which gives the handler's CPU, where a zero would have been taken for
 * CPU 0.
 */
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>
#if __has_include(<sys/rseq.h>)
#include <sys/rseq.h>
#endif

#include "uli_internal.h"

/*
 * Zeroed after the thread pointer: glibc's struct pthread fits (in 2.36
 * its last member, the rseq area, is at 2,336).
 */
#define ULI_TCB_SIZE	4096
/* Further below the thread pointer than this, a block is not static TLS. */
#define ULI_TLS_MAX	(64UL << 20)
/* glibc's TCB alignment on x86-64. */
#define ULI_TCB_ALIGN	64

static uintptr_t __uli_round_up(uintptr_t x, uintptr_t a)
{
	return (x + a - 1) / a * a;
}

static uintptr_t __uli_page(void)
{
	return (uintptr_t)sysconf(_SC_PAGESIZE);
}

static const ElfW(Phdr) *__uli_phdr(const struct dl_phdr_info *i, ElfW(Word) type)
{
	int k;

	for (k = 0; k < i->dlpi_phnum; k++)
		if (i->dlpi_phdr[k].p_type == type)
			return &i->dlpi_phdr[k];
	return NULL;
}

/* dl_iterate_phdr() reports the executable first; AT_PHDR says which it is. */
static bool __uli_is_exe(const struct dl_phdr_info *i, bool first)
{
	unsigned long phdr = getauxval(AT_PHDR);

	return phdr ? (unsigned long)i->dlpi_phdr == phdr : first;
}

/* --- The handler's TLS block --------------------------------------------- */

struct __uli_tls_walk {
	uintptr_t tp;		/* the calling thread's thread pointer */
	uintptr_t fsbase;	/* the new block's; 0 in the first pass */
	size_t max_off;		/* the deepest module block below it */
	size_t align;		/* the largest alignment */
	bool first;
};

/* How far below the thread pointer a module's TLS block is; 0: not static. */
static size_t __uli_tls_offset(const struct dl_phdr_info *i, size_t size,
			       const ElfW(Phdr) *p, const struct __uli_tls_walk *w)
{
	uintptr_t data = 0;

	if (size >= offsetof(struct dl_phdr_info, dlpi_tls_data) + sizeof(i->dlpi_tls_data))
		data = (uintptr_t)i->dlpi_tls_data;
	if (data) {
		if (data >= w->tp || w->tp - data > ULI_TLS_MAX || w->tp - data < p->p_memsz)
			return 0;
		return w->tp - data;
	}
	if (__uli_is_exe(i, w->first))
		return __uli_round_up(p->p_memsz, p->p_align ? p->p_align : 1);
	return 0;
}

static int __uli_tls_cb(struct dl_phdr_info *i, size_t size, void *data)
{
	struct __uli_tls_walk *w = data;
	const ElfW(Phdr) *p = __uli_phdr(i, PT_TLS);
	size_t off;

	off = p && p->p_memsz && p->p_filesz <= p->p_memsz ? __uli_tls_offset(i, size, p, w) : 0;
	w->first = false;
	if (!off)
		return 0;
	if (!w->fsbase) {
		if (off > w->max_off)
			w->max_off = off;
		if (p->p_align > w->align)
			w->align = p->p_align;
		return 0;
	}
	/* A module loaded since the first pass may not fit: not ours. */
	if (off > w->max_off)
		return 0;
	memcpy((void *)(w->fsbase - off), (const void *)(i->dlpi_addr + p->p_vaddr), p->p_filesz);
	return 0;
}

/* The rseq area of the block at @fsbase in [@p, @p + @size): no CPU yet. */
static void __uli_tls_rseq(uintptr_t fsbase, void *p, size_t size)
{
#ifdef RSEQ_SIG
	uintptr_t a = fsbase + __rseq_offset;

	if (!__rseq_size || a < (uintptr_t)p ||
	    a + sizeof(struct rseq) > (uintptr_t)p + size)
		return;
	((struct rseq *)a)->cpu_id_start = 0;
	((struct rseq *)a)->cpu_id = RSEQ_CPU_ID_UNINITIALIZED;
#else
	(void)fsbase, (void)p, (void)size;
#endif
}

int __uli_tls_create(struct uli *u)
{
	struct __uli_tls_walk w = { .align = ULI_TCB_ALIGN, .first = true };
	uintptr_t page = __uli_page(), a, head, guard, pguard, *tcb;
	size_t size;
	void *p;

	__asm__ ("mov %%fs:0, %0" : "=r" (w.tp));
	__asm__ ("mov %%fs:0x28, %0" : "=r" (guard));
	__asm__ ("mov %%fs:0x30, %0" : "=r" (pguard));

	dl_iterate_phdr(__uli_tls_cb, &w);
	a = w.align > page ? w.align : page;
	head = __uli_round_up(w.max_off, a);
	size = head + ULI_TCB_SIZE + (a > page ? a : 0);
	p = mmap(NULL, size, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (p == MAP_FAILED)
		return -ENOMEM;

	w.fsbase = __uli_round_up((uintptr_t)p + head, a);
	w.first = true;
	dl_iterate_phdr(__uli_tls_cb, &w);
	tcb = (uintptr_t *)w.fsbase;
	tcb[0x00 / 8] = w.fsbase;
	tcb[0x10 / 8] = w.fsbase;
	tcb[0x28 / 8] = guard;
	tcb[0x30 / 8] = pguard;
	__uli_tls_rseq(w.fsbase, p, size);

	u->tls = p;
	u->tls_size = size;
	u->fsbase = w.fsbase;
	return 0;
}

void __uli_tls_destroy(struct uli *u)
{
	if (u->tls)
		munmap(u->tls, u->tls_size);
	u->tls = NULL;
	u->fsbase = 0;
}

/* --- The executable's segments -------------------------------------------- */

struct __uli_seg_walk {
	int which;
	struct __uli_range *r;
	int max, n;
	bool first;
};

static void __uli_seg_add(struct __uli_seg_walk *w, uintptr_t start, uintptr_t end)
{
	if (start >= end)
		return;
	if (w->n < w->max)
		w->r[w->n] = (struct __uli_range){ start, end };
	w->n++;
}

static int __uli_seg_cb(struct dl_phdr_info *i, size_t size, void *data)
{
	struct __uli_seg_walk *w = data;
	const ElfW(Phdr) *relro = __uli_phdr(i, PT_GNU_RELRO);
	uintptr_t page = __uli_page(), rs = 0, re = 0, s, e;
	bool first = w->first;
	int k;

	(void)size;
	w->first = false;
	if (!__uli_is_exe(i, first))
		return 0;
	/*
	 * After relocation the C library makes the RELRO pages read-only
	 * (.data.rel.ro, .got): [start rounded down, end rounded down).
	 */
	if (relro) {
		rs = (i->dlpi_addr + relro->p_vaddr) & ~(page - 1);
		re = (i->dlpi_addr + relro->p_vaddr + relro->p_memsz) & ~(page - 1);
	}
	for (k = 0; k < i->dlpi_phnum; k++) {
		const ElfW(Phdr) *p = &i->dlpi_phdr[k];

		if (p->p_type != PT_LOAD || !p->p_memsz)
			continue;
		s = (i->dlpi_addr + p->p_vaddr) & ~(page - 1);
		e = __uli_round_up(i->dlpi_addr + p->p_vaddr + p->p_memsz, page);
		if (w->which == ULI_SEG_READONLY) {
			if (!(p->p_flags & PF_W))
				__uli_seg_add(w, s, e);
			continue;
		}
		if (!(p->p_flags & PF_W))
			continue;
		if (rs < re && rs < e && s < re) {
			__uli_seg_add(w, s, rs);
			__uli_seg_add(w, re, e);
		} else {
			__uli_seg_add(w, s, e);
		}
	}
	if (w->which == ULI_SEG_READONLY && rs < re)
		__uli_seg_add(w, rs, re);
	return 1;
}

int __uli_exe_segments(int which, struct __uli_range *r, int max)
{
	struct __uli_seg_walk w = { .which = which, .r = r, .max = max, .first = true };

	dl_iterate_phdr(__uli_seg_cb, &w);
	if (w.n > max)
		return -ENOSPC;
	return __uli_merge_ranges(r, w.n);
}

static int __uli_range_cmp(const void *a, const void *b)
{
	const struct __uli_range *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/* Sort, and make overlapping or adjacent ranges one; the new count. */
int __uli_merge_ranges(struct __uli_range *r, int n)
{
	int i, out = 0;

	qsort(r, n, sizeof(*r), __uli_range_cmp);
	for (i = 0; i < n; i++) {
		if (r[i].start >= r[i].end)
			continue;
		if (out && r[i].start <= r[out - 1].end) {
			if (r[i].end > r[out - 1].end)
				r[out - 1].end = r[i].end;
			continue;
		}
		r[out++] = r[i];
	}
	return out;
}
