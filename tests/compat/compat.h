/* SPDX-License-Identifier: MIT */
/*
 * compat.h - what tests/uli_compat.c and its 32-bit helpers (tests/compat,
 * /bin/compat in the guest) share: the page through which spin32 reports.
 * 32-bit fields only, so that -m32 and -m64 lay it out alike.
 */
#ifndef COMPAT_H
#define COMPAT_H

#include <stdint.h>

/* The instruction __kernel_vsyscall enters the kernel with. */
enum { VDSO_NONE, VDSO_SYSENTER, VDSO_SYSCALL, VDSO_INT80 };

/* Selectors in compat_shared.sel[]. */
enum { SEL_CS, SEL_DS, SEL_ES, SEL_FS, SEL_GS, SEL_SS, NR_SEL };

struct compat_shared {
	uint32_t stop;		/* set by the test: finish the block and exit */
	uint32_t bits;		/* the helper's word size: 32 */
	uint32_t pid;
	uint32_t blocks;	/* loop blocks done */
	uint32_t vsyscall;	/* AT_SYSINFO (__kernel_vsyscall), 0: none */
	uint32_t vdso_entry;	/* VDSO_*: what __kernel_vsyscall executes */
	uint32_t sel[NR_SEL];	/* the selectors at start */
	/* System calls made and checked. */
	uint32_t n_int80;	/* int $0x80, in the loop */
	uint32_t n_vsys;	/* call __kernel_vsyscall, in the loop */
	uint32_t n_libc;	/* glibc's syscall() and getppid(), between blocks */
	/* Mismatches. */
	uint32_t bad_gpr;	/* %eax ... %ebp */
	uint32_t bad_xmm;	/* %xmm0-%xmm6 */
	uint32_t bad_seg;	/* a selector */
	uint32_t bad_tls;	/* the __thread word read through %gs */
	uint32_t bad_int80;	/* getpid() by int $0x80 */
	uint32_t bad_vsys;	/* getppid() through the vDSO */
	uint32_t bad_libc;	/* glibc's */
	/* What the last mismatch saw. */
	uint32_t bad_regs[7];	/* eax ebx ecx edx esi edi ebp, at bad_gpr */
	uint32_t bad_sel;	/* the selector that differed */
	uint32_t bad_val;	/* the TLS word or system call result */
};

#endif
