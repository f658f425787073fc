// SPDX-License-Identifier: MIT
/*
 * upcall.c - the direct upcall method, through /dev/uli.
 *
 * One open file per registration.  The kernel enters the trampoline
 * (asm/uli_trampoline.asm) with %rdi at u->tramp and the FS base of the
 * registration's own TLS block (image.c); the trampoline calls the
 * handler and ends the upcall with ioctl(fd, ULI_IOC_RETURN).  The same
 * ioctls serve the handler (intercepted by the kernel on the CPU it runs
 * on) and ordinary threads, of the owner or of another process holding
 * the file (a fork child, one it was passed to).
 *
 * What the handler touches of the program's and of libuli's is pinned
 * as soon as it is registered, because a handler that faults is aborted
 * (the kernel pins the stack): the executable's writable segments, the
 * TLS block and this registration's struct uli.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/irq_user.h>
#include <linux/uli.h>

#include "uli_internal.h"

/* What asm/uli_trampoline.asm hard-codes: its %defines must follow. */
_Static_assert(offsetof(struct __uli_tramp, func) == 0, "TRAMP_FUNC");
_Static_assert(offsetof(struct __uli_tramp, arg) == 8, "TRAMP_ARG");
_Static_assert(offsetof(struct __uli_tramp, fd) == 16, "TRAMP_FD");
_Static_assert(SYS_ioctl == 16, "SYS_ioctl");
_Static_assert(ULI_IOC_RETURN == 0xb911, "ULI_IOC_RETURN");
/* uli.h restates the kernel's constants, for programs without its headers. */
_Static_assert(ULI_DEFAULT_SHARE == ULI_SHARE_DEFAULT && ULI_MIN_SHARE == ULI_SHARE_MIN &&
	       ULI_MAX_SHARE == ULI_SHARE_MAX, "ULI_*_SHARE");
_Static_assert(ULI_ACK_STATUS == IRQ_USER_ACK_STATUS && ULI_ACK_VALUE == IRQ_USER_ACK_VALUE,
	       "ULI_ACK_*");

/*
 * A system call through no C library code: the handler may make it (the
 * kernel allows it ULI_IOC_WAKEUP and ULI_IOC_RETURN).  The caller sets
 * errno; the handler's is its own, in its TLS block.
 */
static inline long __uli_ioctl(int fd, unsigned long cmd, unsigned long arg)
{
	long ret;

	__asm__ volatile ("syscall"
			  : "=a" (ret)
			  : "0" (16L /* SYS_ioctl */), "D" ((long)fd), "S" (cmd), "d" (arg)
			  : "rcx", "r11", "memory");
	return ret;
}

static int __uli_upcall_pin(struct uli *u, uintptr_t start, uintptr_t end)
{
	struct uli_pin p = { .addr = start, .len = end - start };

	return ioctl(u->ulifd, ULI_IOC_PIN, &p) ? -errno : 0;
}

/*
 * Pin what the handler touches of the program's and ours, right after
 * registering (the pins need the registration).  Until then it is all
 * resident (written, and locked if the limit allows): an upcall in
 * between finds it so.
 */
static int __uli_pin_own(struct uli *u)
{
	struct __uli_range r[ULI_MAX_PINS + 2];
	int n, i, ret;

	n = __uli_exe_segments(ULI_SEG_WRITABLE, r, ULI_MAX_PINS);
	if (n < 0)
		return n;
	r[n++] = (struct __uli_range){ (uintptr_t)u->tls, (uintptr_t)u->tls + u->tls_size };
	r[n++] = (struct __uli_range){ (uintptr_t)u, (uintptr_t)u + u->size };
	n = __uli_merge_ranges(r, n);
	if (n > ULI_MAX_PINS)
		return -ENOSPC;
	for (i = 0; i < n; i++) {
		ret = __uli_upcall_pin(u, r[i].start, r[i].end);
		if (ret)
			return ret;
	}
	return 0;
}

/*
 * On failure the caller ends what was done with __uli_upcall_stop():
 * closing the file ends a registration that succeeded.
 */
static int __uli_upcall_start(struct uli *u, const struct irq_user_dev *dev)
{
	struct uli_register r;
	void *page;
	int ret;

	ret = __uli_tls_create(u);
	if (ret)
		return ret;
	u->ulifd = open("/dev/uli", O_RDWR | O_CLOEXEC);
	if (u->ulifd < 0)
		return errno == ENOENT ? -ENODEV : -errno;

	u->tramp.func = u->func;
	u->tramp.arg = u->arg;
	u->tramp.fd = u->ulifd;

	memset(&r, 0, sizeof(r));
	if (!dev) {
		r.source = ULI_SOURCE_IRQ;
		r.irq = u->irq;
	} else {
		r.source = dev->type == IRQ_USER_DEV_PCI_MSI ? ULI_SOURCE_PCI_MSI :
			   dev->type == IRQ_USER_DEV_MMIO ? ULI_SOURCE_PCI_MMIO :
			   ULI_SOURCE_PCI_INTX;
		if (r.source == ULI_SOURCE_PCI_MMIO)
			r.mmio = dev->mmio;
		r.domain = dev->domain;
		r.bus = dev->bus;
		r.devfn = dev->devfn;
	}
	r.entry = (unsigned long)__uli_trampoline;
	r.entry_arg = (unsigned long)&u->tramp;
	r.stack = (unsigned long)u->stack;
	r.stack_size = u->stacksize & ~15UL;
	r.fsbase = u->fsbase;
	r.nsemas = u->nsemas;
	if (ioctl(u->ulifd, ULI_IOC_REGISTER, &r))
		return -errno;
	ret = __uli_pin_own(u);
	if (ret)
		return ret;

	page = mmap(NULL, 4096, PROT_READ, MAP_SHARED, u->ulifd, 0);
	if (page != MAP_FAILED)
		u->shared = page;
	return 0;
}

/*
 * The owner's close ends the registration: a handler still running is
 * waited for, so the caller may then unmap its TLS block and stack.  In
 * another process (a fork child) it only lets go of that one's copy.
 */
static void __uli_upcall_stop(struct uli *u)
{
	if (u->shared)
		munmap((void *)u->shared, 4096);
	u->shared = NULL;
	if (u->ulifd >= 0)
		close(u->ulifd);
	u->ulifd = -1;
}

static int __uli_upcall_sleep(struct uli *u, int sema)
{
	return (int)__uli_ioctl(u->ulifd, ULI_IOC_SLEEP, (unsigned long)sema);
}

/* From the handler too: the kernel checks the number. */
static int __uli_upcall_wakeup(struct uli *u, int sema)
{
	return (int)__uli_ioctl(u->ulifd, ULI_IOC_WAKEUP, (unsigned long)(long)sema);
}

static void __uli_upcall_block(struct uli *u, bool block)
{
	__uli_ioctl(u->ulifd, block ? ULI_IOC_BLOCK : ULI_IOC_UNBLOCK, 0);
}

static int __uli_upcall_stats(struct uli *u, struct uli_stats *st)
{
	struct uli_counters k;
	unsigned int i;

	if (ioctl(u->ulifd, ULI_IOC_STATS, &k))
		return -errno;
	memset(st, 0, sizeof(*st));
	st->interrupts = k.interrupts;
	for (i = 0; i < ULI_NR_CTX; i++)
		st->calls += k.upcalls[i];
	st->ctx_owner = k.upcalls[ULI_CTX_OWNER];
	st->ctx_other = k.upcalls[ULI_CTX_OTHER];
	st->ctx_idle = k.upcalls[ULI_CTX_IDLE];
	st->ctx_kernel = k.upcalls[ULI_CTX_KERNEL];
	st->deferred = k.deferred;
	st->aborted_fault = k.aborts[ULI_ABORT_FAULT];
	st->aborted_illegal = k.aborts[ULI_ABORT_ILLEGAL];
	st->aborted_fpe = k.aborts[ULI_ABORT_FPE];
	st->aborted_syscall = k.aborts[ULI_ABORT_SYSCALL];
	st->aborted_timeout = k.aborts[ULI_ABORT_TIMEOUT];
	st->max_handler_ns = k.max_ns;
	st->last_handler_ns = k.last_ns;
	return 0;
}

static int __uli_upcall_budget(struct uli *u, uint64_t ns)
{
	__u64 v = ns;

	return ioctl(u->ulifd, ULI_IOC_SET_BUDGET, &v) ? -errno : 0;
}

static int __uli_upcall_share(struct uli *u, unsigned int permille)
{
	__u32 v = permille;

	return ioctl(u->ulifd, ULI_IOC_SET_SHARE, &v) ? -errno : 0;
}

const struct __uli_ops __uli_upcall_ops = {
	.name		= "upcall",
	.start		= __uli_upcall_start,
	.stop		= __uli_upcall_stop,
	.sleep		= __uli_upcall_sleep,
	.wakeup		= __uli_upcall_wakeup,
	.block		= __uli_upcall_block,
	.stats		= __uli_upcall_stats,
	.budget		= __uli_upcall_budget,
	.share		= __uli_upcall_share,
	.pin		= __uli_upcall_pin,
};
