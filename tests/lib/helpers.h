/* SPDX-License-Identifier: MIT */
/*
 * helpers.h - what the tests, examples and benchmark share: time, CPUs
 * and affinity, files, /proc/irq/N/irq, /proc/interrupts, uio, ULI
 * registrations, capabilities and thread state.  Built once into
 * libhelpers.a with edu.c.
 *
 * Every function returns a value or -errno (or says otherwise) and
 * never asserts, so that the tests keep their ASSERT_*()s, which need
 * the harness's _metadata, in the test bodies.
 */
#ifndef HELPERS_H
#define HELPERS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <linux/capability.h>
#include <linux/irq_user.h>

#include "edu.h"
#include "uli.h"

#define T_DEBUGFS_IRQS	"/sys/kernel/debug/irq/irqs"

/*
 * The budget (ULI_set_budget(), ns) of registrations in tests that are
 * not about the budget: under TCG a host stall of the vCPU can hold a
 * short handler past the default 10 ms and end it with SIGXCPU.
 */
#define T_LONG_BUDGET	1000000000ull

/* --- time ------------------------------------------------------------- */

/* An ordered TSC read (lfence first); inline, for the handlers' timing. */
static inline uint64_t t_rdtsc(void)
{
	uint32_t lo, hi;

	__asm__ volatile ("lfence; rdtsc" : "=a" (lo), "=d" (hi) :: "memory");
	return (uint64_t)hi << 32 | lo;
}

/* CLOCK_MONOTONIC in ns. */
uint64_t t_now_ns(void);
uint64_t t_ms_since(uint64_t t0_ns);
/* nanosleep(), resumed after signals. */
void t_msleep(unsigned int ms);
/* TSC cycles per millisecond, against CLOCK_MONOTONIC over 50 ms. */
uint64_t t_tsc_per_ms(void);

/*
 * The full count of a test (100,000 raises), or ULI_TEST_N; part scales
 * it down for the slower cases (a fork per step, say): full / part.
 */
uint64_t t_test_n(uint64_t part);

/* --- CPUs, affinity, processes ------------------------------------------ */

int t_ncpus(void);
/* Pin the calling thread to @cpu: 0 or -errno. */
int t_pin(int cpu);
/* The CPU an interrupt line is delivered to (its effective affinity), or -errno. */
int t_irq_cpu(int irq);
/* Have an interrupt delivered to cpu: 0 or -errno. */
int t_set_irq_cpu(int irq, int cpu);
/* A child pinned to cpu running fn forever; kill it with t_stop(). */
pid_t t_spawn(int cpu, void (*fn)(void));
void t_stop(pid_t pid);
/* voluntary_ctxt_switches + nonvoluntary_ctxt_switches of a task. */
long t_ctxt_switches(pid_t pid, pid_t tid);
/* The state letter of thread or process @tid (R, S, D, ...), or 0. */
char t_thread_state(pid_t tid);
/* The syscall number thread @tid is in (/proc/.../syscall), or -1. */
long t_thread_syscall(pid_t tid);
/*
 * Wait up to @timeout_ms until thread (or process) @tid sleeps (S) in
 * syscall @nr (when /proc/.../syscall is there; else sleeping is enough).
 */
bool t_wait_blocked(pid_t tid, long nr, unsigned int timeout_ms);

/* --- files ------------------------------------------------------------- */

/* Read a whole (small) file, NUL-terminated; length or -errno. */
long t_read_file(const char *path, char *buf, size_t len);
/* Write s to a file opened with O_WRONLY | flags: 0 or -errno. */
int t_write_file_flags(const char *path, const char *s, int flags);
/* Write s to a sysfs or proc file: 0 or -errno. */
int t_write_file(const char *path, const char *s);
int t_set_nonblock(int fd, bool on);
/* revents, 0 on timeout, or -errno. */
int t_poll(int fd, short events, int timeout_ms);
/* The number after "Key:" in a "Key: N kB" file (meminfo, status), or -1. */
long t_field_kb(const char *path, const char *key);
/* A field of /proc/<pid>/status (0: self) in kB, or -1. */
long t_status_kb(pid_t pid, const char *key);
/*
 * Empty every slab cache's per-CPU and partial slabs, and KASAN's
 * quarantine of freed objects, which otherwise keep Slab some hundred
 * kB above what is in use, differently from one reading to the next.
 */
void t_shrink_slabs(void);
/*
 * A /proc/meminfo value in kB, or -1, after caches were dropped and RCU's
 * lazy frees flushed: once two readings 50 ms apart agree.
 */
long t_meminfo_kb(const char *key);
/*
 * The first "key : value" line of /proc/cpuinfo whose key starts with
 * @key: does its value have @word as a whole word?
 */
bool t_cpuinfo_has(const char *key, const char *word);
/* Booted with threadirqs: handlers that may be threads are. */
bool t_threadirqs(void);

/* --- /proc/irq/N/irq ----------------------------------------------------- */

/* fd or -errno */
int t_irq_open(int irq, int flags);
/* Close *fd if open; *fd = -1. */
void t_irq_close(int *fd);
/* The count of a 4-byte read, or -errno. */
long t_irq_read4(int fd);
/* Bytes read (8) into *ev, or -errno. */
long t_irq_read_ev(int fd, struct irq_user_event *ev);
/* 0 or -errno */
int t_irq_set_device(int fd, const struct irq_user_dev *d);

/*
 * Waiting for an interrupt without racing the hard handler.
 *
 * The file's read() and poll() unmask the line (or the device) when they
 * find no count.  Called right after a raise, while the handler is still
 * running on another CPU, that unmask can let the same interrupt be
 * counted twice (see proc_read's exclusive_poll_loop).  Tests about
 * something else wait through an edge-triggered epoll set made before the
 * raise instead: adding the file polls it once (claiming the line and
 * unmasking it); afterwards epoll polls it only after a wake-up, which
 * the handler does after counting.  Re-arm with a non-blocking read that
 * finds nothing, or by closing and reopening the set.
 */
int t_ep_open(int fd);
/* 1 when the file became readable, 0 on timeout, -errno. */
int t_ep_wait(int ep, int timeout_ms);
/*
 * One raise / wait / read / ack cycle on @fd, in any mode: the count read
 * (1 expected), or -EEXIST (a count was already there), -ETIMEDOUT, -errno.
 */
long t_irq_cycle(const struct edu *e, int fd);
/*
 * Clear what an earlier (failed) test may have left in QEMU's IO-APIC for
 * @e's line, when nobody else uses it: a level that went away while the
 * pin was shut down (a masked edge entry) stays latched there and fires
 * once the pin is started again.  Claim the line, toggle the device's
 * level (which resets the latch in level mode), drain, close.  The device
 * must be quiet (edu_open_clean()).  0 or -errno.
 */
int t_line_flush(const struct edu *e);

/* Raise @bits on @e after @delay_ms, from a thread (t_raise_later()). */
struct t_raiser {
	const struct edu *e;
	unsigned int delay_ms;
	uint32_t bits;
	uint64_t raised_ns;
	pthread_t th;
};

/* Start @r's thread; join r->th afterwards.  0 or -errno. */
int t_raise_later(struct t_raiser *r, const struct edu *e,
		  unsigned int delay_ms, uint32_t bits);

/* --- the state of a line: /proc/interrupts, debugfs ------------------------ */

/* The disable depth of the line ("ddepth:" in debugfs), or -errno. */
int t_irq_ddepth(int irq);
/* /proc/irq/N/spurious: count and unhandled.  0 or -errno. */
int t_irq_spurious(int irq, unsigned int *count, unsigned int *unhandled);
/*
 * The line of /proc/interrupts for @irq: *total gets the sum of the
 * per-CPU counts, @actions (if not NULL) the action names ("a, b"),
 * after the chip and "hwirq-flow" fields.  0 or -errno (-ENOENT: no
 * line, which the kernel omits for a line without actions or counts).
 */
int t_irq_stat(int irq, unsigned long long *total, char *actions, size_t alen);
/*
 * @cpu's count in the architecture's row @name of /proc/interrupts
 * ("IWI", "LOC", ...), or -errno (-ENOENT: no such row or column).
 */
long long t_arch_irq_count(const char *name, int cpu);
/* Total interrupts of the line so far (0 when it has no line). */
unsigned long long t_irq_total(int irq);
/* Does the line of /proc/interrupts for @irq name @what? */
bool t_irq_has_action(int irq, const char *what);
/* How many actions the line has (0 when none or no line). */
int t_irq_nactions(int irq);
/* The "user:<comm>" name of our action, for t_irq_has_action(). */
const char *t_irq_user_name(void);
/* The Linux IRQ of @e's MSI vector, 0 if it has none, or -errno. */
int t_msi_irq(const struct edu *e);

/* --- uio ------------------------------------------------------------------ */

/* Open /dev/uioN of a device bound to uio_pci_generic: fd or -errno. */
int t_uio_open(const struct edu *e);
/* Wait up to @timeout_ms for an event: the cumulative count, or -errno. */
long t_uio_wait(int fd, int timeout_ms);
/* The cumulative event count from sysfs (uio's "event"), or -errno. */
long t_uio_count(const struct edu *e);

/* --- ULI registrations ------------------------------------------------------ */

/* ULI_register_pci()'s flags, or this: ULI_register_mmio() with edu_uli_regs. */
#define T_MMIO	0x1000

/* Register @e's interrupt as @how says: ULI_INTX, ULI_MSI or T_MMIO. */
void *t_register(const struct edu *e, uli_func_t func, void *arg,
		 int nsemas, void *stack, int stacksize, int how);
/*
 * In a forked owner process: join the cgroup v2 directory @cg (unless
 * NULL), register @e's INTx with @func and pin @page (4 KiB, shared with
 * the test).  On failure -errno goes to *@ready and the process exits.
 */
void *t_owner_register(const struct edu *e, const char *cg, uli_func_t func,
		       void *page, volatile int *ready);
/* The line of a registration: ULI_irq(), or for MSI the device's vector. */
int t_uli_irq(void *uli, const struct edu *e);
/* Does ULI_MODE select the direct upcall (unset, empty or "upcall")? */
bool t_upcall_mode(void);
/*
 * This process's /dev/uli descriptor (the one of its registration, for
 * the raw ioctls of <linux/uli.h>), or -1: none, or more than one.
 */
int t_uli_fd(void);
/* Registrations listed in /sys/kernel/debug/uli, or -1. */
int t_registrations(void);
/*
 * Does this kernel run handlers?  False without /dev/uli, and where it
 * refuses every registration with EOPNOTSUPP (Xen PV, SEV-ES, TDX guests).
 */
bool t_uli_offered(void);
/* Spin until *counter reaches want; false after timeout_ms. */
bool t_wait_count(volatile uint64_t *counter, uint64_t want,
		  unsigned int timeout_ms);
/*
 * Raise e n times, each handled (*handled counted up by the handler)
 * within timeout_ms before the next: how many were.
 */
uint64_t t_raise_each(const struct edu *e, volatile uint64_t *handled,
		      uint64_t n, unsigned int timeout_ms);
/* Handler calls the kernel ended, of every cause. */
uint64_t t_aborts(const struct uli_stats *st);

/* --- capabilities --------------------------------------------------------- */

int t_caps_get(struct __user_cap_data_struct d[2]);
int t_caps_set(struct __user_cap_data_struct d[2]);
/* Drop @cap from the effective, permitted and inheritable sets of @d. */
void t_cap_clear(struct __user_cap_data_struct d[2], int cap);

#endif
