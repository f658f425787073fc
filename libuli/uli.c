// SPDX-License-Identifier: MIT
/*
 * uli.c - registration, semaphores, blocking and pinning for both
 * delivery methods.
 *
 * The proc method: a SCHED_FIFO thread, running on the handler's stack,
 * blocks in read() on /proc/irq/N/irq and calls the handler for each batch
 * of interrupts.  A blocked registration stops reading the line (the
 * device stays quiet, masked by the kernel) until ULI_unblock_intr().
 * The handler has its thread's TLS, its own.  A fork child inherits no
 * registration: its copy of the file is closed at the fork (else it would
 * keep the line claimed after the owner's end), and its copy of the handle
 * is inert.
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
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <linux/capability.h>
#include <linux/futex.h>
#include <linux/irq_user.h>
#include <linux/uli.h>
#include <sys/syscall.h>

#include "uli.h"
#include "uli_internal.h"

#define ULI_STACK_DEFAULT	(64 * 1024)

static uint64_t __uli_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* --- Semaphores (proc method: futexes in our own memory) ---------------- */

static int __uli_futex(atomic_uint *addr, int op, unsigned int val)
{
	return syscall(SYS_futex, addr, op | FUTEX_PRIVATE_FLAG, val, NULL, NULL, 0);
}

static int __uli_sema_check(struct uli *u, int sema)
{
	if (!u || sema < 0 || sema >= u->nsemas) {
		errno = EINVAL;
		return -1;
	}
	return 0;
}

int ULI_sleep(void *uli, int sema)
{
	struct uli *u = uli;
	atomic_uint *c;
	unsigned int v;

	if (__uli_sema_check(u, sema))
		return -1;
	if (u->mode == ULI_METHOD_UPCALL)
		return __uli_upcall_sleep(u, sema);
	if (u->inherited) {
		errno = ENODEV;
		return -1;
	}
	/* As the kernel's semaphore: 0 with one post taken, or EINTR. */
	c = &u->semas[sema];
	for (;;) {
		v = atomic_load(c);
		while (v)
			if (atomic_compare_exchange_weak(c, &v, v - 1))
				return 0;
		if (__uli_futex(c, FUTEX_WAIT, 0) && errno == EINTR)
			return -1;
	}
}

int ULI_wakeup(void *uli, int sema)
{
	struct uli *u = uli;

	/* The kernel checks the number. */
	if (u && u->mode == ULI_METHOD_UPCALL)
		return __uli_upcall_wakeup(u, sema);
	if (__uli_sema_check(u, sema))
		return -1;
	if (u->inherited) {
		errno = ENODEV;
		return -1;
	}
	atomic_fetch_add(&u->semas[sema], 1);
	__uli_futex(&u->semas[sema], FUTEX_WAKE, 1);
	return 0;
}

/* --- The proc method ---------------------------------------------------- */

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
	u->cycles = ev->cycles;
	u->status |= ev->status;
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
			u->status = 0;
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
}

/* --- Registration ------------------------------------------------------- */

static int __uli_method(void)
{
	const char *m = getenv("ULI_MODE");

	if (!m || !*m || !strcmp(m, "upcall"))
		return ULI_METHOD_UPCALL;
	if (!strcmp(m, "proc"))
		return ULI_METHOD_PROC;
	return -1;
}

static void __uli_free(struct uli *u)
{
	if (u->own_stack && u->stack)
		munmap(u->stack, u->stacksize);
	__uli_tls_destroy(u);
	free(u->semas);
	munmap(u, u->size);
}

/* CAP_IPC_LOCK in the effective set. */
static bool __uli_cap_ipc_lock(void)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];

	if (syscall(SYS_capget, &h, d))
		return false;
	return d[CAP_TO_INDEX(CAP_IPC_LOCK)].effective & CAP_TO_MASK(CAP_IPC_LOCK);
}

/*
 * Keep resident what the handler touches but cannot be pinned (pins are
 * writable): its code and read-only data, and whatever else it reads.
 * A help, not a guarantee: a failure here does not fail the
 * registration.  What the handler is promised (its stack, the program's
 * static data, its TLS block, what ULI_pin() covers) is pinned by the
 * kernel, and charged to RLIMIT_MEMLOCK; a limit too low for that fails
 * the registration there, with ENOMEM.  Locking everything now and in
 * future (MCL_FUTURE) only where the limit cannot bite: with a finite
 * one, MCL_FUTURE makes the program's later allocations (malloc, thread
 * stacks) fail once its locked memory reaches the limit.  Over the
 * limit, the executable's code and read-only data at least.
 */
static void __uli_lock_memory(void)
{
	struct __uli_range r[8];
	struct rlimit rl;
	int i, n;

	if ((!getrlimit(RLIMIT_MEMLOCK, &rl) && rl.rlim_cur == RLIM_INFINITY) ||
	    __uli_cap_ipc_lock()) {
		if (!mlockall(MCL_CURRENT | MCL_FUTURE))
			return;
	} else if (!mlockall(MCL_CURRENT)) {
		return;
	}
	n = __uli_exe_segments(ULI_SEG_READONLY, r, 8);
	for (i = 0; i < n; i++)
		mlock((void *)r[i].start, r[i].end - r[i].start);
}

/*
 * Make [addr, addr + len) present and writable, or fail (-1) where a write
 * would fault: MADV_POPULATE_WRITE, or, on a kernel without madvise(),
 * a read() from /dev/zero into each page, which the kernel refuses with
 * EFAULT where the caller would take SIGSEGV.
 */
static int __uli_populate_write(void *addr, size_t len, size_t page)
{
	uintptr_t start = (uintptr_t)addr & ~(page - 1), p;
	uintptr_t end = (uintptr_t)addr + len;
	int fd, ret = 0;

	if (!madvise((void *)start, end - start, MADV_POPULATE_WRITE))
		return 0;
	if (errno != ENOSYS && errno != EINVAL)
		return -1;
	fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);
	for (p = (uintptr_t)addr; p < end && !ret; p = (p & ~(page - 1)) + page) {
		if (fd >= 0)
			ret = read(fd, (void *)p, 1) == 1 ? 0 : -1;
		else
			*(volatile char *)p = 0;	/* no /dev/zero: best effort */
	}
	if (fd >= 0)
		close(fd);
	return ret;
}

static struct uli *__uli_alloc(uli_func_t func, void *arg, int nsemas,
			       void *stack, int stacksize)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t size = (sizeof(struct uli) + page - 1) / page * page;
	int method = __uli_method();
	struct uli *u;

	if (!func || nsemas < 0 || nsemas > ULI_MAX_SEMAS || stacksize < 0 ||
	    (!stack) != (!stacksize) || method < 0 ||
	    (stack && stacksize < ULI_STACK_MIN)) {
		errno = EINVAL;
		return NULL;
	}
	/* Pages of its own, zero: the upcall method pins them. */
	u = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (u == MAP_FAILED)
		return NULL;
	u->size = size;
	u->mode = method;
	u->func = func;
	u->arg = arg;
	u->fd = u->ulifd = -1;
	u->nsemas = nsemas;
	u->semas = calloc(nsemas ? nsemas : 1, sizeof(*u->semas));
	if (!u->semas)
		goto nomem;
	if (stack) {
		u->stack = stack;
		u->stacksize = stacksize;
	} else {
		u->stacksize = ULI_STACK_DEFAULT;
		u->stack = mmap(NULL, u->stacksize, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (u->stack == MAP_FAILED) {
			u->stack = NULL;
			goto nomem;
		}
		u->own_stack = true;
	}
	/*
	 * Everything the handler touches must be resident: a fault in an
	 * upcall aborts the handler.  Lock what the limit allows, then
	 * populate the stack writable (a read would map the shared zero
	 * page; the kernel pins the stack at registration).  A caller's
	 * stack with a hole or a read-only page is refused here (EFAULT),
	 * as the kernel would refuse it, rather than faulting in a write.
	 */
	__uli_lock_memory();
	if (__uli_populate_write(u->stack, u->stacksize, page)) {
		__uli_free(u);
		errno = EFAULT;
		return NULL;
	}
	return u;
nomem:
	__uli_free(u);
	errno = ENOMEM;
	return NULL;
}

static void *__uli_start(struct uli *u, const struct irq_user_dev *dev, int flags)
{
	int ret;

	if (u->mode == ULI_METHOD_PROC)
		ret = __uli_proc_start(u, dev);
	else
		ret = __uli_upcall_start(u, dev, flags);
	if (ret) {
		if (u->mode == ULI_METHOD_PROC)
			__uli_proc_stop(u);
		else
			__uli_upcall_stop(u);	/* ends a registration made */
		__uli_free(u);
		errno = -ret;
		return NULL;
	}
	return u;
}

void *ULI_register_irq(int irq, uli_func_t func, void *arg,
		       int nsemas, void *stack, int stacksize)
{
	struct uli *u;

	if (irq < 0) {
		errno = EINVAL;
		return NULL;
	}
	u = __uli_alloc(func, arg, nsemas, stack, stacksize);
	if (!u)
		return NULL;
	u->irq = irq;
	return __uli_start(u, NULL, 0);
}

/* "DDDD:BB:DD.F" or "BB:DD.F", enabled so that its INTx is routed. */
static int __uli_pci_lookup(const char *bdf, struct irq_user_dev *dev, int *irq)
{
	unsigned int dom = 0, bus, slot, fn;
	char path[128], buf[16], end;
	int fd, n;

	if (!bdf || (sscanf(bdf, "%x:%x:%x.%x%c", &dom, &bus, &slot, &fn, &end) != 4 &&
		     (dom = 0, sscanf(bdf, "%x:%x.%x%c", &bus, &slot, &fn, &end) != 3)) ||
	    dom > 0xffff || bus > 0xff || slot > 0x1f || fn > 7)
		return -EINVAL;
	memset(dev, 0, sizeof(*dev));
	dev->type = IRQ_USER_DEV_PCI_INTX;
	dev->domain = dom;
	dev->bus = bus;
	dev->devfn = slot << 3 | fn;

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%04x:%02x:%02x.%x/enable",
		 dom, bus, slot, fn);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ENODEV : -errno;
	n = write(fd, "1", 1);
	close(fd);
	if (n != 1)
		return -errno;
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%04x:%02x:%02x.%x/irq",
		 dom, bus, slot, fn);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -EIO;
	buf[n] = 0;
	*irq = atoi(buf);
	return *irq > 0 ? 0 : -ENODEV;
}

/* ULI_register_pci(), and ULI_register_mmio() with @regs (@flags 0). */
static void *__uli_register_pci(const char *bdf, const struct uli_mmio_regs *regs,
				uli_func_t func, void *arg, int nsemas,
				void *stack, int stacksize, int flags)
{
	struct irq_user_dev dev;
	struct uli *u;
	int ret, irq = -1;

	/* Arguments first: a refused call leaves the device as it was. */
	u = __uli_alloc(func, arg, nsemas, stack, stacksize);
	if (!u)
		return NULL;
	ret = __uli_pci_lookup(bdf, &dev, &irq);
	if (ret) {
		__uli_free(u);
		errno = -ret;
		return NULL;
	}
	if (regs) {
		u->kernel_acks = true;
		/* The kernel checks the fields, in both methods. */
		dev.type = IRQ_USER_DEV_MMIO;
		dev.mmio = (struct irq_user_mmio){
			.bar = regs->bar,
			.status_off = regs->status_off,
			.status_mask = regs->status_mask,
			.ack_off = regs->ack_off,
			.ack_mode = regs->ack_mode,
			.ack_value = regs->ack_value,
		};
	}
	if (flags == ULI_MSI) {
		/* The /proc method asks the line's file for the device's MSI. */
		dev.type = IRQ_USER_DEV_PCI_MSI;
		u->msi = true;
	}
	u->irq = irq;
	return __uli_start(u, &dev, flags);
}

void *ULI_register_pci(const char *bdf, uli_func_t func, void *arg,
		       int nsemas, void *stack, int stacksize, int flags)
{
	if (flags != ULI_INTX && flags != ULI_MSI) {
		errno = EINVAL;
		return NULL;
	}
	return __uli_register_pci(bdf, NULL, func, arg, nsemas, stack, stacksize, flags);
}

void *ULI_register_mmio(const char *bdf, const struct uli_mmio_regs *regs,
			uli_func_t func, void *arg, int nsemas, void *stack,
			int stacksize)
{
	if (!regs) {
		errno = EINVAL;
		return NULL;
	}
	return __uli_register_pci(bdf, regs, func, arg, nsemas, stack, stacksize, 0);
}

int ULI_destroy(void *uli)
{
	struct uli *u = uli;

	if (!u) {
		errno = EINVAL;
		return -1;
	}
	/* A fork child's copy: proc_stop finds no thread (see __uli_fork_child). */
	if (u->mode == ULI_METHOD_PROC)
		__uli_proc_stop(u);
	else
		__uli_upcall_stop(u);
	__uli_free(u);
	return 0;
}

/* --- Pinning ------------------------------------------------------------ */

int ULI_pin(void *uli, void *addr, size_t len)
{
	struct uli *u = uli;
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t a = (uintptr_t)addr, start, end;
	int ret;

	if (!u || !len || a + len < a || a + len > UINTPTR_MAX - page + 1) {
		errno = EINVAL;
		return -1;
	}
	start = a & ~(page - 1);
	end = (a + len + page - 1) & ~(page - 1);
	/* A thread takes its page faults: resident is enough. */
	if (u->mode == ULI_METHOD_PROC)
		return mlock((void *)start, end - start);
	ret = __uli_upcall_pin(u, start, end);
	if (ret) {
		errno = -ret;
		return -1;
	}
	return 0;
}

/* --- Blocking ----------------------------------------------------------- */

void ULI_block_intr(void *uli)
{
	struct uli *u = uli;

	if (!u)
		return;
	if (u->mode == ULI_METHOD_UPCALL) {
		__uli_upcall_block(u, true);
		return;
	}
	if (u->inherited)
		return;
	atomic_store(&u->blocked, 1);
	while (atomic_load(&u->running))
		sched_yield();
}

void ULI_unblock_intr(void *uli)
{
	struct uli *u = uli;

	if (!u)
		return;
	if (u->mode == ULI_METHOD_UPCALL) {
		__uli_upcall_block(u, false);
		return;
	}
	if (u->inherited)
		return;
	atomic_store(&u->blocked, 0);
	/* The thread runs the collapsed call, if any. */
	__uli_futex((atomic_uint *)&u->blocked, FUTEX_WAKE, 1);
}

/* --- Introspection ------------------------------------------------------ */

int ULI_get_stats(void *uli, struct uli_stats *st)
{
	struct uli *u = uli;

	if (!u || !st) {
		errno = EINVAL;
		return -1;
	}
	if (u->mode == ULI_METHOD_UPCALL)
		return __uli_upcall_stats(u, st);
	memset(st, 0, sizeof(*st));
	st->calls = atomic_load(&u->calls);
	st->interrupts = atomic_load(&u->interrupts);
	st->max_handler_ns = atomic_load(&u->max_ns);
	return 0;
}

int ULI_set_budget(void *uli, uint64_t ns)
{
	struct uli *u = uli;

	/* The kernel's range in both methods: a program may switch. */
	if (!u || ns < ULI_MIN_BUDGET_NS || ns > ULI_MAX_BUDGET_NS) {
		errno = EINVAL;
		return -1;
	}
	if (u->mode == ULI_METHOD_UPCALL)
		return __uli_upcall_budget(u, ns);
	return 0;	/* a thread cannot hang the CPU: nothing to enforce */
}

int ULI_set_share(void *uli, unsigned int permille)
{
	struct uli *u = uli;

	if (!u || permille < ULI_MIN_SHARE || permille > ULI_MAX_SHARE) {
		errno = EINVAL;
		return -1;
	}
	if (u->mode == ULI_METHOD_UPCALL)
		return __uli_upcall_share(u, permille);
	return 0;	/* a thread is scheduled as any other: nothing to enforce */
}

const char *ULI_mode(void *uli)
{
	struct uli *u = uli;

	return !u ? NULL : u->mode == ULI_METHOD_PROC ? "proc" : "upcall";
}

int ULI_irq(void *uli)
{
	struct uli *u = uli;

	return u && !u->msi ? u->irq : -1;
}

uint64_t ULI_hardirq_cycles(void *uli)
{
	struct uli *u = uli;

	if (!u)
		return 0;
	if (u->mode == ULI_METHOD_UPCALL)
		return u->shared ? ((const volatile struct uli_page *)u->shared)->hardirq_tsc : 0;
	return u->cycles;
}

uint32_t ULI_status(void *uli)
{
	struct uli *u = uli;

	if (!u)
		return 0;
	if (u->mode == ULI_METHOD_UPCALL)
		return u->shared ? ((const volatile struct uli_page *)u->shared)->status : 0;
	return u->status;
}

uint64_t ULI_upcall_cycles(void *uli)
{
	struct uli *u = uli;

	if (!u || u->mode != ULI_METHOD_UPCALL || !u->shared)
		return 0;
	return ((const volatile struct uli_page *)u->shared)->upcall_tsc;
}
