// SPDX-License-Identifier: MIT
/*
 * uli.c - the API: arguments checked, the handle allocated and made
 * resident, the device looked up, then the delivery method's operations
 * (struct __uli_ops: upcall.c, or proc.c when ULI_MODE=proc), with errno
 * set from what they return.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>
#include <linux/capability.h>
#include <linux/irq_user.h>
#include <linux/uli.h>
#include <sys/syscall.h>

#include "uli.h"
#include "uli_internal.h"

#define ULI_STACK_DEFAULT	(64 * 1024)

/* A method's -errno as the API's -1 and errno. */
static int __uli_ret(int ret)
{
	if (ret) {
		errno = -ret;
		return -1;
	}
	return 0;
}

/* --- Semaphores --------------------------------------------------------- */

int ULI_sleep(void *uli, int sema)
{
	struct uli *u = uli;

	if (!u || sema < 0 || sema >= u->nsemas) {
		errno = EINVAL;
		return -1;
	}
	return __uli_ret(u->ops->sleep(u, sema));
}

/* From the handler too: its errno is its own (its TLS block). */
int ULI_wakeup(void *uli, int sema)
{
	struct uli *u = uli;

	if (!u) {
		errno = EINVAL;
		return -1;
	}
	return __uli_ret(u->ops->wakeup(u, sema));
}

/* --- Registration ------------------------------------------------------- */

static const struct __uli_ops *__uli_method(void)
{
	const char *m = getenv("ULI_MODE");

	if (!m || !*m || !strcmp(m, "upcall"))
		return &__uli_upcall_ops;
	if (!strcmp(m, "proc"))
		return &__uli_proc_ops;
	return NULL;
}

static void __uli_free(struct uli *u)
{
	if (u->own_stack && u->stack)
		munmap(u->stack, u->stacksize);
	__uli_tls_destroy(u);
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
	const struct __uli_ops *ops = __uli_method();
	struct uli *u;

	if (!func || nsemas < 0 || nsemas > ULI_MAX_SEMAS || stacksize < 0 ||
	    (!stack) != (!stacksize) || !ops ||
	    (stack && stacksize < ULI_STACK_MIN)) {
		errno = EINVAL;
		return NULL;
	}
	/* Pages of its own, zero: the upcall method pins them. */
	u = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (u == MAP_FAILED)
		return NULL;
	u->size = size;
	u->ops = ops;
	u->func = func;
	u->arg = arg;
	u->fd = u->ulifd = -1;
	u->nsemas = nsemas;
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

static void *__uli_start(struct uli *u, const struct irq_user_dev *dev)
{
	int ret = u->ops->start(u, dev);

	if (ret) {
		u->ops->stop(u);	/* ends a registration made */
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
	return __uli_start(u, NULL);
}

/*
 * One field of a PCI address: 1 to @width hex digits, then @sep (NUL for
 * the last one); past @sep, or NULL.  The digits are counted before
 * strtoul() reads them: it, like sscanf()'s %x, also takes leading
 * spaces, a sign and "0x", even a "0x" with no digit after it, as 0
 * (which made "0000:00:05.0x" function 0).
 */
static const char *__uli_hex_field(const char *s, size_t width, char sep,
				   unsigned int *val)
{
	size_t n = strspn(s, "0123456789abcdefABCDEF");
	char *end;

	if (!n || n > width || s[n] != sep)
		return NULL;
	*val = strtoul(s, &end, 16);
	return end == s + n ? end + 1 : NULL;
}

/*
 * A PCI address as the kernel names its devices, "DDDD:BB:SS.F", or
 * "BB:SS.F" in domain 0: hex digits, at most as many as there (4, 2, 2
 * and 1), a slot up to 0x1f, a function up to 7, and nothing else.
 */
static int __uli_parse_bdf(const char *s, unsigned int *dom, unsigned int *bus,
			   unsigned int *slot, unsigned int *fn)
{
	const char *p;

	if (!s)
		return -EINVAL;
	p = __uli_hex_field(s, 4, ':', dom);
	if (p)
		p = __uli_hex_field(p, 2, ':', bus);
	if (!p) {			/* "BB:SS.F" */
		*dom = 0;
		p = __uli_hex_field(s, 2, ':', bus);
	}
	if (p)
		p = __uli_hex_field(p, 2, '.', slot);
	if (p)
		p = __uli_hex_field(p, 1, '\0', fn);
	return p && *slot <= 0x1f && *fn <= 7 ? 0 : -EINVAL;
}

/*
 * The line in a device's sysfs "irq": decimal digits and a newline, as
 * the kernel writes it; 0 is no line.
 */
static int __uli_parse_irq(const char *s, int *irq)
{
	size_t n = strspn(s, "0123456789");
	unsigned long v;

	if (!n || n > 10 || (s[n] && strcmp(s + n, "\n")))
		return -EIO;
	v = strtoul(s, NULL, 10);
	if (v > INT_MAX)
		return -EIO;
	*irq = (int)v;
	return v ? 0 : -ENODEV;
}

/* "DDDD:BB:SS.F" or "BB:SS.F", enabled so that its INTx is routed. */
static int __uli_pci_lookup(const char *bdf, struct irq_user_dev *dev, int *irq)
{
	unsigned int dom, bus, slot, fn;
	char path[128], buf[16];
	int fd, n;

	if (__uli_parse_bdf(bdf, &dom, &bus, &slot, &fn))
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
	return __uli_parse_irq(buf, irq);
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
	return __uli_start(u, &dev);
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
	/* A fork child's copy: proc's stop finds no thread (__uli_fork_child). */
	u->ops->stop(u);
	__uli_free(u);
	return 0;
}

/* --- Pinning ------------------------------------------------------------ */

int ULI_pin(void *uli, void *addr, size_t len)
{
	struct uli *u = uli;
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t a = (uintptr_t)addr, start, end;

	if (!u || !len || a + len < a || a + len > UINTPTR_MAX - page + 1) {
		errno = EINVAL;
		return -1;
	}
	start = a & ~(page - 1);
	end = (a + len + page - 1) & ~(page - 1);
	return __uli_ret(u->ops->pin(u, start, end));
}

/* --- Blocking ----------------------------------------------------------- */

void ULI_block_intr(void *uli)
{
	struct uli *u = uli;

	if (u)
		u->ops->block(u, true);
}

void ULI_unblock_intr(void *uli)
{
	struct uli *u = uli;

	if (u)
		u->ops->block(u, false);
}

/* --- Introspection ------------------------------------------------------ */

int ULI_get_stats(void *uli, struct uli_stats *st)
{
	struct uli *u = uli;

	if (!u || !st) {
		errno = EINVAL;
		return -1;
	}
	return __uli_ret(u->ops->stats(u, st));
}

int ULI_set_budget(void *uli, uint64_t ns)
{
	struct uli *u = uli;

	/* The kernel's range in both methods: a program may switch. */
	if (!u || ns < ULI_MIN_BUDGET_NS || ns > ULI_MAX_BUDGET_NS) {
		errno = EINVAL;
		return -1;
	}
	return __uli_ret(u->ops->budget(u, ns));
}

int ULI_set_share(void *uli, unsigned int permille)
{
	struct uli *u = uli;

	if (!u || permille < ULI_MIN_SHARE || permille > ULI_MAX_SHARE) {
		errno = EINVAL;
		return -1;
	}
	return __uli_ret(u->ops->share(u, permille));
}

const char *ULI_mode(void *uli)
{
	struct uli *u = uli;

	return u ? u->ops->name : NULL;
}

int ULI_irq(void *uli)
{
	struct uli *u = uli;

	return u && !u->msi ? u->irq : -1;
}

/*
 * The page the handler reads in both methods: the kernel's for the upcall,
 * the proc thread's own (no upcall stamp) for /proc.
 */
uint64_t ULI_hardirq_cycles(void *uli)
{
	struct uli *u = uli;

	return u && u->shared ? u->shared->hardirq_tsc : 0;
}

uint32_t ULI_status(void *uli)
{
	struct uli *u = uli;

	return u && u->shared ? u->shared->status : 0;
}

uint64_t ULI_upcall_cycles(void *uli)
{
	struct uli *u = uli;

	return u && u->shared ? u->shared->upcall_tsc : 0;
}
