// SPDX-License-Identifier: MIT
/*
 * proc.c - the /proc method, behind the same API as the upcall.
 *
 * A SCHED_FIFO thread, running on the handler's stack, blocks in read()
 * on /proc/irq/N/irq and calls the handler for each batch of interrupts.
 * A blocked registration stops reading the line (the device stays quiet,
 * masked by the kernel) until ULI_unblock_intr().  The handler has its
 * thread's TLS, its own.  Semaphores are futexes in our own memory;
 * ULI_destroy() ends the sleeps on them with ENODEV, as the kernel's
 * teardown does, and frees them once no sleeper is left.  A fork child
 * inherits no registration: its copy of the file is closed at the fork
 * (else it would keep the line claimed after the owner's end), and its
 * copy of the handle is inert.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <linux/futex.h>
#include <linux/irq_user.h>

#include "uli_internal.h"

static uint64_t __uli_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int __uli_futex(atomic_uint *addr, int op, unsigned int val)
{
	return syscall(SYS_futex, addr, op | FUTEX_PRIVATE_FLAG, val, NULL, NULL, 0);
}

/* In u->sleepers: ULI_destroy() waits for the count to drop to 0. */
#define ULI_SLEEPERS_WAITED	0x80000000u

/*
 * As the kernel's semaphore: 0 with one post taken, -EINTR, or -ENODEV
 * once ULI_destroy() has ended the registration (a post taken as it
 * ends included, as in the kernel).  Counted in u->sleepers from before
 * it looks at u->dead to after its last access to u: ULI_destroy() frees
 * the semaphores and the handle only when none is left.
 */
static int __uli_proc_sleep(struct uli *u, int sema)
{
	atomic_uint *c;
	unsigned int v;
	int ret;

	if (u->inherited)
		return -ENODEV;
	atomic_fetch_add(&u->sleepers, 1);
	c = &u->semas[sema];
	for (;;) {
		if (atomic_load(&u->dead)) {
			ret = -ENODEV;
			break;
		}
		v = atomic_load(c);
		while (v && !atomic_compare_exchange_weak(c, &v, v - 1))
			;
		if (v) {
			ret = atomic_load(&u->dead) ? -ENODEV : 0;
			break;
		}
		/* Only on 0: __uli_proc_end_sleeps() makes every count non-zero. */
		if (__uli_futex(c, FUTEX_WAIT, 0) && errno == EINTR) {
			ret = -EINTR;
			break;
		}
	}
	/*
	 * The last access to u.  The wakeup may find u unmapped already: a
	 * private futex's wakeup does not touch the memory, and a waiter on
	 * whatever is mapped there by then wakes spuriously, as futex
	 * waiters may.
	 */
	if (atomic_fetch_sub(&u->sleepers, 1) == (ULI_SLEEPERS_WAITED | 1))
		__uli_futex(&u->sleepers, FUTEX_WAKE, 1);
	return ret;
}

/*
 * ULI_destroy(), the source released: end the owner's sleeps with
 * ENODEV, as the kernel's teardown does, then wait until no thread is
 * left in __uli_proc_sleep().  A sleeper finds u->dead before it waits,
 * or its futex wait returns at once (its count is no longer 0) or is
 * woken here; each looks at u->dead again.
 */
static void __uli_proc_end_sleeps(struct uli *u)
{
	unsigned int v;
	int i;

	atomic_store(&u->dead, 1);
	for (i = 0; i < u->nsemas; i++) {
		atomic_fetch_or(&u->semas[i], 1);
		__uli_futex(&u->semas[i], FUTEX_WAKE, INT_MAX);
	}
	v = atomic_fetch_or(&u->sleepers, ULI_SLEEPERS_WAITED) | ULI_SLEEPERS_WAITED;
	while (v != ULI_SLEEPERS_WAITED) {
		__uli_futex(&u->sleepers, FUTEX_WAIT, v);
		v = atomic_load(&u->sleepers);
	}
}

static int __uli_proc_wakeup(struct uli *u, int sema)
{
	if (sema < 0 || sema >= u->nsemas)
		return -EINVAL;
	if (u->inherited || atomic_load(&u->dead))
		return -ENODEV;
	atomic_fetch_add(&u->semas[sema], 1);
	__uli_futex(&u->semas[sema], FUTEX_WAKE, 1);
	return 0;
}

static void __uli_proc_call(struct uli *u)
{
	uint64_t t0 = __uli_now_ns(), dt;

	/*
	 * Counted on entry, as the kernel counts an upcall: whoever sees
	 * what the handler did must see the call counted too.
	 */
	atomic_fetch_add(&u->calls, 1);
	u->func(u->arg);
	dt = __uli_now_ns() - t0;
	if (dt > atomic_load(&u->max_ns))
		atomic_store(&u->max_ns, dt);
}

/* Interrupts that read() reported, for the next call. */
static void __uli_proc_add(struct uli *u, const struct irq_user_event *ev)
{
	atomic_fetch_add(&u->interrupts, ev->count);
	atomic_fetch_add(&u->pending, ev->count);
	u->page.hardirq_tsc = ev->cycles;
	u->page.status |= ev->status;
}

/*
 * The thread blocks in read(), as the 2005 /proc method intends: one
 * system call per batch of interrupts.  Cancellation (ULI_destroy) is
 * allowed only there, never in the middle of a handler.
 */
static void *__uli_proc_thread(void *arg)
{
	struct uli *u = arg;
	struct pollfd pfd = { .fd = u->fd, .events = POLLIN };
	struct irq_user_event ev;
	ssize_t n;

	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
	for (;;) {
		/*
		 * Blocked: stop reading, which would unmask the device; the
		 * kernel keeps it masked and counts what comes in.
		 */
		while (atomic_load(&u->blocked))
			__uli_futex((atomic_uint *)&u->blocked, FUTEX_WAIT, 1);
		if (atomic_load(&u->stop))
			break;
		if (!atomic_load(&u->pending)) {
			pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
			n = read(u->fd, &ev, sizeof(ev));
			pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
			if (n != sizeof(ev))
				continue;	/* EINTR */
			u->page.status = 0;
			__uli_proc_add(u, &ev);
		} else if ((u->kernel_acks || u->msi) && poll(&pfd, 1, 0) == 1 &&
			   read(u->fd, &ev, sizeof(ev)) == sizeof(ev)) {
			/*
			 * Left over from a block: what came in since is part
			 * of the same call, as in the upcall method.  Only a
			 * source nobody masks (MMIO acknowledged by the
			 * kernel, MSI): poll() would lift a mask from a
			 * device still waiting for its handler.
			 */
			__uli_proc_add(u, &ev);
		}

		/* block_intr() sets blocked, then waits for running to clear. */
		atomic_store(&u->running, 1);
		if (!atomic_load(&u->blocked)) {
			atomic_store(&u->pending, 0);
			__uli_proc_call(u);
		}
		atomic_store(&u->running, 0);
	}
	return NULL;
}

/*
 * The proc registrations of this process, for fork(): a child's copy of
 * the /proc file would keep the line claimed after the owner ended the
 * registration (the kernel lets go of it at the file's last close), and
 * its thread is not in the child.
 */
static pthread_mutex_t __uli_list_lock = PTHREAD_MUTEX_INITIALIZER;
static struct uli *__uli_proc_list;
static pthread_once_t __uli_atfork_once = PTHREAD_ONCE_INIT;

static void __uli_fork_prepare(void)
{
	pthread_mutex_lock(&__uli_list_lock);
}

static void __uli_fork_parent(void)
{
	pthread_mutex_unlock(&__uli_list_lock);
}

static void __uli_fork_child(void)
{
	struct uli *u;

	for (u = __uli_proc_list; u; u = u->next) {
		u->inherited = true;
		u->thread_started = false;
		if (u->fd >= 0)
			close(u->fd);
		u->fd = -1;
	}
	pthread_mutex_unlock(&__uli_list_lock);
}

static void __uli_atfork_init(void)
{
	pthread_atfork(__uli_fork_prepare, __uli_fork_parent, __uli_fork_child);
}

static void __uli_list_add(struct uli *u)
{
	pthread_once(&__uli_atfork_once, __uli_atfork_init);
	pthread_mutex_lock(&__uli_list_lock);
	u->next = __uli_proc_list;
	__uli_proc_list = u;
	pthread_mutex_unlock(&__uli_list_lock);
}

static void __uli_list_del(struct uli *u)
{
	struct uli **pp;

	pthread_mutex_lock(&__uli_list_lock);
	for (pp = &__uli_proc_list; *pp; pp = &(*pp)->next) {
		if (*pp == u) {
			*pp = u->next;
			break;
		}
	}
	pthread_mutex_unlock(&__uli_list_lock);
}

static int __uli_proc_start(struct uli *u, const struct irq_user_dev *dev)
{
	struct sched_param sp = { .sched_priority = sched_get_priority_max(SCHED_FIFO) - 10 };
	char path[64];
	pthread_attr_t attr;
	uint32_t n;
	int ret;

	u->semas = calloc(u->nsemas ? u->nsemas : 1, sizeof(*u->semas));
	if (!u->semas)
		return -ENOMEM;
	u->shared = &u->page;
	snprintf(path, sizeof(path), "/proc/irq/%d/irq", u->irq);
	/* Listed first: a fork from now on closes the child's copy. */
	__uli_list_add(u);
	u->fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (u->fd < 0)
		return -errno;
	if (dev && ioctl(u->fd, IRQ_USER_SET_DEVICE, dev))
		return -errno;
	/* Claim now, so that a busy line fails the registration. */
	if (read(u->fd, &n, sizeof(n)) == sizeof(n)) {
		atomic_store(&u->interrupts, n);
		atomic_store(&u->pending, n);
	} else if (errno != EAGAIN) {
		return -errno;
	}
	/* From now on the thread blocks in read(). */
	if (fcntl(u->fd, F_SETFL, 0))
		return -errno;

	pthread_attr_init(&attr);
	pthread_attr_setstack(&attr, u->stack, u->stacksize);
	pthread_attr_setinheritsched(&attr, PTHREAD_EXPLICIT_SCHED);
	pthread_attr_setschedpolicy(&attr, SCHED_FIFO);
	pthread_attr_setschedparam(&attr, &sp);
	ret = pthread_create(&u->thread, &attr, __uli_proc_thread, u);
	if (ret == EPERM) {	/* no real-time privilege: run it anyway */
		pthread_attr_setinheritsched(&attr, PTHREAD_INHERIT_SCHED);
		ret = pthread_create(&u->thread, &attr, __uli_proc_thread, u);
	}
	pthread_attr_destroy(&attr);
	if (ret)
		return -ret;
	u->thread_started = true;
	return 0;
}

static void __uli_proc_stop(struct uli *u)
{
	__uli_list_del(u);
	if (u->thread_started) {
		atomic_store(&u->stop, 1);
		pthread_cancel(u->thread);	/* acts in read() only */
		/* A blocked thread waits on a futex: let it go. */
		atomic_store(&u->blocked, 0);
		__uli_futex((atomic_uint *)&u->blocked, FUTEX_WAKE, 1);
		pthread_join(u->thread, NULL);
	}
	if (u->fd >= 0)
		close(u->fd);
	u->fd = -1;
	/* A fork child's copy has no sleepers: its sleep() fails at once. */
	if (u->semas && !u->inherited)
		__uli_proc_end_sleeps(u);
	free(u->semas);
	u->semas = NULL;
}

static void __uli_proc_block(struct uli *u, bool block)
{
	if (u->inherited)
		return;
	if (block) {
		atomic_store(&u->blocked, 1);
		while (atomic_load(&u->running))
			sched_yield();
		return;
	}
	atomic_store(&u->blocked, 0);
	/* The thread runs the collapsed call, if any. */
	__uli_futex((atomic_uint *)&u->blocked, FUTEX_WAKE, 1);
}

static int __uli_proc_stats(struct uli *u, struct uli_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->calls = atomic_load(&u->calls);
	st->interrupts = atomic_load(&u->interrupts);
	st->max_handler_ns = atomic_load(&u->max_ns);
	return 0;
}

/* A thread cannot hang the CPU: no budget to enforce. */
static int __uli_proc_budget(struct uli *u, uint64_t ns)
{
	(void)u;
	(void)ns;
	return 0;
}

/* A thread is scheduled as any other: no share to enforce. */
static int __uli_proc_share(struct uli *u, unsigned int permille)
{
	(void)u;
	(void)permille;
	return 0;
}

/* A thread takes its page faults: resident is enough. */
static int __uli_proc_pin(struct uli *u, uintptr_t start, uintptr_t end)
{
	(void)u;
	return mlock((void *)start, end - start) ? -errno : 0;
}

const struct __uli_ops __uli_proc_ops = {
	.name		= "proc",
	.start		= __uli_proc_start,
	.stop		= __uli_proc_stop,
	.sleep		= __uli_proc_sleep,
	.wakeup		= __uli_proc_wakeup,
	.block		= __uli_proc_block,
	.stats		= __uli_proc_stats,
	.budget		= __uli_proc_budget,
	.share		= __uli_proc_share,
	.pin		= __uli_proc_pin,
};

