/* SPDX-License-Identifier: MIT */
/* uli_internal.h - libuli's private state; not installed. */
#ifndef ULI_INTERNAL_H
#define ULI_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <linux/uli.h>

#include "uli.h"

#define ULI_STACK_MIN	(16 * 1024)

struct irq_user_dev;
struct uli;

/*
 * A delivery method (upcall.c, proc.c).  Each operation returns 0 or
 * -errno; the public functions (uli.c) check their arguments, call these
 * and set errno.  wakeup() is also called from a running handler.
 */
struct __uli_ops {
	const char *name;
	/* On failure the caller calls stop(), which ends what was done. */
	int (*start)(struct uli *u, const struct irq_user_dev *dev);
	void (*stop)(struct uli *u);
	int (*sleep)(struct uli *u, int sema);
	int (*wakeup)(struct uli *u, int sema);
	void (*block)(struct uli *u, bool block);
	int (*stats)(struct uli *u, struct uli_stats *st);
	int (*budget)(struct uli *u, uint64_t ns);
	int (*share)(struct uli *u, unsigned int permille);
	/* [start, end), page-aligned */
	int (*pin)(struct uli *u, uintptr_t start, uintptr_t end);
};

extern const struct __uli_ops __uli_upcall_ops, __uli_proc_ops;

/* What the trampoline (asm/uli_trampoline.asm) finds at %rdi. */
struct __uli_tramp {
	uli_func_t func;	/* offset 0 */
	void *arg;		/* 8 */
	int fd;			/* 16: /dev/uli, for ULI_IOC_RETURN */
};

void __uli_trampoline(void);

/* A range of addresses, [start, end). */
struct __uli_range {
	uintptr_t start, end;
};

/*
 * mmap()ed, not malloc()ed, page-aligned: the trampoline reads tramp, so
 * the upcall method pins this structure's pages, and only them.
 */
struct uli {
	size_t size;			/* of this mapping */
	const struct __uli_ops *ops;
	uli_func_t func;
	void *arg;
	int irq;
	int nsemas;
	atomic_uint *semas;		/* proc method */
	void *stack;
	size_t stacksize;
	bool own_stack;

	/* proc method */
	struct uli *next;		/* on the list fork() looks at */
	bool inherited;			/* a fork child's copy: inert */
	int fd;				/* /proc/irq/N/irq */
	pthread_t thread;
	bool thread_started;
	atomic_int stop, blocked, running;
	atomic_int dead;		/* ended: sleep() and wakeup() fail */
	atomic_uint sleepers;		/* threads in sleep(), | ULI_SLEEPERS_WAITED */
	atomic_uint pending;
	atomic_uint_fast64_t calls, interrupts, max_ns;
	struct uli_page page;		/* what *shared is: the batch's stamp, status */
	bool kernel_acks;		/* ULI_register_mmio(): never masked */
	bool msi;			/* ULI_MSI: never masked; irq is the line */

	/* both: the kernel's page (upcall), or page (proc) */
	const volatile struct uli_page *shared;

	/* upcall method */
	int ulifd;			/* /dev/uli */
	struct __uli_tramp tramp;
	void *tls;			/* the handler's TLS block (image.c) */
	size_t tls_size;
	uintptr_t fsbase;		/* its TCB, the handler's FS base */
};


/* image.c: what libuli needs of the program's ELF image. */
int __uli_tls_create(struct uli *u);
void __uli_tls_destroy(struct uli *u);
enum { ULI_SEG_WRITABLE, ULI_SEG_READONLY };
int __uli_exe_segments(int which, struct __uli_range *r, int max);
int __uli_merge_ranges(struct __uli_range *r, int n);

#endif
