/* SPDX-License-Identifier: MIT */
/*
 * uli.h - user-level interrupts for x86-64 Linux.
 *
 * Register a C function as the handler of an interrupt source; it runs in
 * user mode, in this process, on the stack given at registration and with
 * thread-local storage of its own, each time the device interrupts.  The
 * shapes follow IRIX uli(3).  See uli(7).
 *
 * Delivery methods, chosen at registration by the ULI_MODE environment
 * variable:
 *   ULI_MODE unset or "upcall"  the kernel's interrupt return path enters
 *                               the handler directly (/dev/uli)
 *   ULI_MODE=proc               a SCHED_FIFO thread blocked in read() on
 *                               /proc/irq/N/irq calls the handler
 */
#ifndef ULI_H
#define ULI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ULI_register_pci() flags */
#define ULI_INTX	0x1	/* PCI 2.3 INTx masking: shared lines work */
#define ULI_MSI		0x2	/* the device's MSI vector */

/*
 * Share of a CPU, in thousandths, that a registration's calls may take
 * there (ULI_set_share); the calls of all registrations on a CPU together
 * take at most half of it by default.
 */
#define ULI_DEFAULT_SHARE	500u
#define ULI_MIN_SHARE		10u
#define ULI_MAX_SHARE		900u

/* Handler budget, per registration (ULI_set_budget), in nanoseconds. */
#define ULI_DEFAULT_BUDGET_NS	10000000u
#define ULI_MIN_BUDGET_NS	1000u
#define ULI_MAX_BUDGET_NS	1000000000u

typedef void (*uli_func_t)(void *arg);

void *ULI_register_irq(int irq, uli_func_t func, void *arg,
		       int nsemas, void *stack, int stacksize);
void *ULI_register_pci(const char *bdf, uli_func_t func, void *arg,
		       int nsemas, void *stack, int stacksize, int flags);

int ULI_sleep(void *uli, int sema);
int ULI_wakeup(void *uli, int sema);
void ULI_block_intr(void *uli);
void ULI_unblock_intr(void *uli);
int ULI_destroy(void *uli);

/* Extensions. */

/*
 * A device's interrupt status and acknowledge registers, 32 bits wide, in
 * one memory BAR: the kernel tells that the device interrupts by
 * (status & status_mask) != 0 and acknowledges it itself, so its line may
 * be shared without PCI 2.3 INTx masking and is never masked.
 */
struct uli_mmio_regs {
	uint32_t bar;		/* 0-5 */
	uint32_t status_off;	/* offsets in the BAR, 4-byte aligned */
	uint32_t status_mask;	/* not 0 */
	uint32_t ack_off;
	uint32_t ack_mode;	/* ULI_ACK_STATUS or ULI_ACK_VALUE */
	uint32_t ack_value;	/* for ULI_ACK_VALUE; else 0 */
};

#define ULI_ACK_STATUS	0	/* write back the status bits seen */
#define ULI_ACK_VALUE	1	/* write ack_value */

void *ULI_register_mmio(const char *bdf, const struct uli_mmio_regs *regs,
			uli_func_t func, void *arg, int nsemas, void *stack,
			int stacksize);
/*
 * From the handler of a ULI_register_mmio() registration: the status bits
 * the kernel acknowledged for this call (of every interrupt since the
 * previous call, ORed).  0 for other registrations.
 */
uint32_t ULI_status(void *uli);

/*
 * Pin the pages covering [addr, addr + len) for the handler until the
 * registration ends: present, writable, never migrated or shared
 * copy-on-write with a fork child.  Charged to RLIMIT_MEMLOCK.  The
 * program's static data, the handler's stack and TLS are pinned already.
 * From the registering process only; not from the handler.  0 or -1.
 */
int ULI_pin(void *uli, void *addr, size_t len);

/* Delivery statistics of one registration. */
struct uli_stats {
	uint64_t calls;		/* handler invocations */
	uint64_t interrupts;	/* interrupts taken for this registration */
	uint64_t ctx_owner;	/* upcalls that interrupted the owner */
	uint64_t ctx_other;	/* ... another process */
	uint64_t ctx_idle;	/* ... the idle task */
	uint64_t ctx_kernel;	/* ... kernel code */
	uint64_t deferred;	/* delivered at a later interrupt return */
	uint64_t aborted_fault;	/* handler ended by the kernel: #PF, #GP */
	uint64_t aborted_illegal; /* ... #UD, int3, #DB */
	uint64_t aborted_fpe;	/* ... #DE, #MF, #XM */
	uint64_t aborted_syscall; /* ... a system call not allowed */
	uint64_t aborted_timeout; /* ... over its budget */
	uint64_t max_handler_ns; /* longest handler run */
	uint64_t last_handler_ns; /* the last one */
};

int ULI_get_stats(void *uli, struct uli_stats *st);
int ULI_set_budget(void *uli, uint64_t ns);
int ULI_set_share(void *uli, unsigned int permille);
/* "upcall" or "proc": how this registration is delivered. */
const char *ULI_mode(void *uli);
/* The interrupt line (or -1 for MSI) of a registration. */
int ULI_irq(void *uli);
/*
 * The cycle counter (TSC) the kernel's hard handler read on entry for the
 * interrupt being handled; callable from the handler (no system call).
 * 0 when the kernel did not say.  For latency measurement.
 */
uint64_t ULI_hardirq_cycles(void *uli);
/*
 * The cycle counter the kernel read when it began the upcall now running,
 * just after taking it off its queue: an interrupt whose hard handler
 * came later asks for another call.  0 in proc mode.
 */
uint64_t ULI_upcall_cycles(void *uli);

#ifdef __cplusplus
}
#endif

#endif /* ULI_H */
