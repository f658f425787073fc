// SPDX-License-Identifier: GPL-2.0
/*
 * uli_errors - /dev/uli refuses bad input with a clear error and changes
 * nothing: every field of ULI_IOC_REGISTER out of range, each ioctl before
 * registration or with a bad argument, mmap() other than one read-only
 * page, a device that a kernel driver or another registration holds, a
 * line a non-sharing user holds, and the missing capability.  After each
 * refusal the line has no new action, the device's DisINTx bit is as it
 * was, and the same file still registers.  libuli, in both methods,
 * refuses a stack it cannot make resident, bad arguments and malformed
 * PCI addresses before it touches the device.
 */
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <linux/uli.h>

#include "kselftest_harness.h"
#include "helpers.h"

#define STACK_SIZE	(64 * 1024)

static void entry(void)
{
}

FIXTURE(err) {
	struct edu e;
	int fd;
	void *stack;
	struct uli_register r;
};

FIXTURE_SETUP(err)
{
	int ret;

	self->fd = -1;
	if (!t_uli_offered())
		SKIP(return, "this kernel refuses registrations (uli_unsupported)");
	ret = edu_open_clean(&self->e, EDU_SLOT_C);
	ASSERT_EQ(0, ret) TH_LOG("edu@%d: %s", EDU_SLOT_C, strerror(-ret));
	self->stack = mmap(NULL, STACK_SIZE, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, self->stack);
	memset(self->stack, 0, STACK_SIZE);
	self->fd = open("/dev/uli", O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, self->fd) TH_LOG("/dev/uli: %s", strerror(errno));

	/* A valid registration of edu@5 by INTx masking; tests spoil one field. */
	memset(&self->r, 0, sizeof(self->r));
	self->r.source = ULI_SOURCE_PCI_INTX;
	self->r.domain = self->e.domain;
	self->r.bus = self->e.bus;
	self->r.devfn = self->e.devfn;
	self->r.entry = (unsigned long)entry;
	self->r.stack = (unsigned long)self->stack;
	self->r.stack_size = STACK_SIZE;
}

FIXTURE_TEARDOWN(err)
{
	if (self->fd >= 0)
		close(self->fd);
	munmap(self->stack, STACK_SIZE);
	edu_close_clean(&self->e);
}

static int reg(int fd, const struct uli_register *r)
{
	return ioctl(fd, ULI_IOC_REGISTER, r) ? errno : 0;
}

/* Nothing of ours on the line, and the device's DisINTx as we left it. */
static bool untouched(const struct edu *e, int intx_on)
{
	return !t_irq_has_action(e->irq, "uli") && edu_intx_enabled(e) == intx_on;
}

struct bad_field {
	const char *what;
	void (*spoil)(struct uli_register *r, void *stack);
	int err;
};

/* edu's status and acknowledge registers, ULI_SOURCE_PCI_MMIO. */
static void mmio_edu(struct uli_register *r)
{
	r->source = ULI_SOURCE_PCI_MMIO;
	r->mmio = (struct irq_user_mmio){
		.bar = edu_uli_regs.bar,
		.status_off = edu_uli_regs.status_off,
		.status_mask = edu_uli_regs.status_mask,
		.ack_off = edu_uli_regs.ack_off,
		.ack_mode = edu_uli_regs.ack_mode,
	};
}

#define SPOIL(name, body) \
	static void spoil_##name(struct uli_register *r, void *stack) \
	{ (void)stack; body; }
#define BAD(name, err) { #name, spoil_##name, err }

SPOIL(source_0, r->source = 0)
SPOIL(source_5, r->source = 5)
SPOIL(irq_negative, r->source = ULI_SOURCE_IRQ; r->irq = -1;
      r->domain = r->bus = r->devfn = 0)
SPOIL(irq_with_bdf, r->source = ULI_SOURCE_IRQ; r->irq = 10)
SPOIL(pci_with_irq, r->irq = 10)
SPOIL(pad, r->__pad = 1)
SPOIL(flags, r->flags = 1)
SPOIL(reserved, r->__reserved = 1)
SPOIL(nsemas, r->nsemas = ULI_MAX_SEMAS + 1)
SPOIL(budget_small, r->budget_ns = 999)
SPOIL(budget_large, r->budget_ns = 1000000001ull)
SPOIL(entry_null, r->entry = 0)
SPOIL(entry_kernel, r->entry = 0xffffffff81000000ull)
SPOIL(stack_small, r->stack_size = 4095 & ~15)
SPOIL(stack_large, r->stack_size = (16 << 20) + 16)
SPOIL(stack_unaligned, r->stack += 8; r->stack_size -= 16)
SPOIL(stack_size_unaligned, r->stack_size -= 8)
SPOIL(stack_kernel, r->stack = 0xffff888000000000ull)
SPOIL(fsbase_kernel, r->fsbase = 0xffff888000000000ull)
SPOIL(no_device, r->devfn = 0x1f << 3)
/* Pinning fails: part of the stack is not mapped, or not writable. */
SPOIL(stack_unmapped, munmap((char *)stack + STACK_SIZE - 4096, 4096))
SPOIL(stack_readonly, mprotect(stack, STACK_SIZE, PROT_READ))
/* Register fields with another source; then bad descriptions of edu. */
SPOIL(mmio_on_intx, r->mmio.status_mask = 1)
SPOIL(mmio_on_msi, r->source = ULI_SOURCE_PCI_MSI; r->mmio.ack_off = 4)
SPOIL(mmio_on_irq, r->source = ULI_SOURCE_IRQ; r->irq = 10;
      r->domain = r->bus = r->devfn = 0; r->mmio.bar = 1)
SPOIL(mmio_bar_6, mmio_edu(r); r->mmio.bar = 6)
SPOIL(mmio_bar_absent, mmio_edu(r); r->mmio.bar = 1)
SPOIL(mmio_mask_0, mmio_edu(r); r->mmio.status_mask = 0)
SPOIL(mmio_status_unaligned, mmio_edu(r); r->mmio.status_off = 0x26)
SPOIL(mmio_ack_unaligned, mmio_edu(r); r->mmio.ack_off = 0x65)
SPOIL(mmio_status_past_bar, mmio_edu(r); r->mmio.status_off = 1 << 20)
SPOIL(mmio_ack_wraps, mmio_edu(r); r->mmio.ack_off = 0xfffffffc)
SPOIL(mmio_ack_mode, mmio_edu(r); r->mmio.ack_mode = 2)
SPOIL(mmio_ack_value_unused, mmio_edu(r); r->mmio.ack_value = 1)
SPOIL(mmio_with_irq, mmio_edu(r); r->irq = 10)

static const struct bad_field bad[] = {
	BAD(source_0, EINVAL), BAD(source_5, EINVAL),
	BAD(irq_negative, EINVAL), BAD(irq_with_bdf, EINVAL),
	BAD(pci_with_irq, EINVAL), BAD(pad, EINVAL), BAD(flags, EINVAL),
	BAD(reserved, EINVAL), BAD(nsemas, EINVAL),
	BAD(budget_small, EINVAL), BAD(budget_large, EINVAL),
	BAD(entry_null, EFAULT), BAD(entry_kernel, EFAULT),
	BAD(stack_small, EINVAL), BAD(stack_large, EINVAL),
	BAD(stack_unaligned, EINVAL), BAD(stack_size_unaligned, EINVAL),
	BAD(stack_kernel, EFAULT), BAD(fsbase_kernel, EFAULT),
	BAD(no_device, ENODEV),
	BAD(stack_unmapped, EFAULT), BAD(stack_readonly, EFAULT),
	BAD(mmio_on_intx, EINVAL), BAD(mmio_on_msi, EINVAL),
	BAD(mmio_on_irq, EINVAL), BAD(mmio_bar_6, EINVAL),
	BAD(mmio_bar_absent, EINVAL), BAD(mmio_mask_0, EINVAL),
	BAD(mmio_status_unaligned, EINVAL), BAD(mmio_ack_unaligned, EINVAL),
	BAD(mmio_status_past_bar, EINVAL), BAD(mmio_ack_wraps, EINVAL),
	BAD(mmio_ack_mode, EINVAL), BAD(mmio_ack_value_unused, EINVAL),
	BAD(mmio_with_irq, EINVAL),
};

TEST_F(err, register_fields)
{
	unsigned int i;

	ASSERT_EQ(0, edu_set_intx(&self->e, false));	/* DisINTx set */
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct uli_register r = self->r;

		bad[i].spoil(&r, self->stack);
		EXPECT_EQ(bad[i].err, reg(self->fd, &r)) TH_LOG("%s", bad[i].what);
		EXPECT_TRUE(untouched(&self->e, false)) TH_LOG("%s changed something", bad[i].what);
		/* Put the stack back for the next one. */
		mprotect(self->stack, STACK_SIZE, PROT_READ | PROT_WRITE);
		mmap((char *)self->stack + STACK_SIZE - 4096, 4096, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	}
	EXPECT_EQ(EFAULT, reg(self->fd, NULL));
	EXPECT_EQ(EFAULT, reg(self->fd, (void *)0xffff888000000000ull));

	/* The same file still registers, and takes the device's INTx. */
	EXPECT_EQ(0, reg(self->fd, &self->r));
	EXPECT_TRUE(t_irq_has_action(self->e.irq, "uli"));
	EXPECT_EQ(1, edu_intx_enabled(&self->e));
	/* Once. */
	EXPECT_EQ(EBUSY, reg(self->fd, &self->r));
}

/*
 * The good description of edu registers; the device's INTx is turned on
 * (the status register tells the handler), and the line shared.
 */
TEST_F(err, mmio_description_registers)
{
	struct uli_register r = self->r;

	mmio_edu(&r);
	ASSERT_EQ(0, edu_set_intx(&self->e, false));
	EXPECT_EQ(0, reg(self->fd, &r));
	EXPECT_TRUE(t_irq_has_action(self->e.irq, "uli"));
	EXPECT_EQ(1, edu_intx_enabled(&self->e));
	EXPECT_EQ(EBUSY, reg(self->fd, &r));
}

TEST_F(err, ioctls_before_registration)
{
	struct uli_counters st;
	__u64 ns = 1000000;

	EXPECT_EQ(-1, ioctl(self->fd, ULI_IOC_WAKEUP, 0));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-1, ioctl(self->fd, ULI_IOC_SLEEP, 0));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-1, ioctl(self->fd, ULI_IOC_BLOCK, 0));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-1, ioctl(self->fd, ULI_IOC_UNBLOCK, 0));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-1, ioctl(self->fd, ULI_IOC_STATS, &st));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-1, ioctl(self->fd, ULI_IOC_SET_BUDGET, &ns));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-1, ioctl(self->fd, ULI_IOC_RETURN, 0));
	EXPECT_EQ(EINVAL, errno);
}

TEST_F(err, ioctls_after_registration)
{
	struct uli_register r2;
	struct uli_counters st;
	__u32 share;
	__u64 ns;

	self->r.nsemas = 2;
	ASSERT_EQ(0, reg(self->fd, &self->r));
	EXPECT_EQ(-1, ioctl(self->fd, ULI_IOC_WAKEUP, 2));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-1, ioctl(self->fd, ULI_IOC_SLEEP, 2));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-1, ioctl(self->fd, ULI_IOC_SLEEP, -1L));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-1, ioctl(self->fd, ULI_IOC_STATS, NULL));
	EXPECT_EQ(EFAULT, errno);
	ns = 999;
	EXPECT_EQ(-1, ioctl(self->fd, ULI_IOC_SET_BUDGET, &ns));
	EXPECT_EQ(EINVAL, errno);
	ns = 1000000001ull;
	EXPECT_EQ(-1, ioctl(self->fd, ULI_IOC_SET_BUDGET, &ns));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-1, ioctl(self->fd, ULI_IOC_SET_BUDGET, NULL));
	EXPECT_EQ(EFAULT, errno);
	share = ULI_SHARE_MIN - 1;
	EXPECT_EQ(-1, ioctl(self->fd, ULI_IOC_SET_SHARE, &share));
	EXPECT_EQ(EINVAL, errno);
	share = ULI_SHARE_MAX + 1;
	EXPECT_EQ(-1, ioctl(self->fd, ULI_IOC_SET_SHARE, &share));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-1, ioctl(self->fd, ULI_IOC_SET_SHARE, NULL));
	EXPECT_EQ(EFAULT, errno);
	share = ULI_SHARE_MAX;
	EXPECT_EQ(0, ioctl(self->fd, ULI_IOC_SET_SHARE, &share));
	/*
	 * A second registration on the file, of a source nobody holds:
	 * refused, and the first one's notifier stays (undoing it dropped
	 * the owner's mm a second time: a warning in __mmdrop() at exit).
	 */
	r2 = self->r;
	r2.source = ULI_SOURCE_IRQ;
	r2.domain = r2.bus = r2.devfn = 0;
	r2.irq = 7;
	EXPECT_EQ(EBUSY, reg(self->fd, &r2));
	/* Only a handler returns. */
	EXPECT_EQ(-1, ioctl(self->fd, ULI_IOC_RETURN, 0));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-1, ioctl(self->fd, _IO(ULI_IOC_MAGIC, 0x7f), 0));
	EXPECT_EQ(ENOTTY, errno);
	/* The failed calls changed nothing: the counters are all zero. */
	ASSERT_EQ(0, ioctl(self->fd, ULI_IOC_STATS, &st));
	EXPECT_EQ(0, st.interrupts);
	/* And a wakeup of a good semaphore is taken by a sleep. */
	EXPECT_EQ(0, ioctl(self->fd, ULI_IOC_WAKEUP, 1));
	EXPECT_EQ(0, ioctl(self->fd, ULI_IOC_SLEEP, 1));
}

TEST_F(err, mmap_one_read_only_page)
{
	void *p;

	ASSERT_EQ(0, reg(self->fd, &self->r));
	EXPECT_EQ(MAP_FAILED, mmap(NULL, 8192, PROT_READ, MAP_SHARED, self->fd, 0));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(MAP_FAILED, mmap(NULL, 4096, PROT_READ, MAP_SHARED, self->fd, 4096));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(MAP_FAILED, mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, self->fd, 0));
	EXPECT_EQ(EINVAL, errno);
	p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, self->fd, 0);
	ASSERT_NE(MAP_FAILED, p);
	EXPECT_EQ(-1, mprotect(p, 4096, PROT_READ | PROT_WRITE));
	EXPECT_EQ(EACCES, errno);
	munmap(p, 4096);
}

/* One owner per device: another registration, or a kernel driver. */
TEST_F(err, device_held)
{
	struct uli_register r = self->r;
	struct edu e8;
	int fd2, ret;

	ASSERT_EQ(0, reg(self->fd, &self->r));
	fd2 = open("/dev/uli", O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, fd2);
	EXPECT_EQ(EBUSY, reg(fd2, &r));
	r.source = ULI_SOURCE_PCI_MSI;
	EXPECT_EQ(EBUSY, reg(fd2, &r));
	/* Freed with its file: then the device is ours. */
	close(self->fd);
	self->fd = -1;
	EXPECT_EQ(0, reg(fd2, &r));
	close(fd2);

	/* edu@8 bound to uio_pci_generic. */
	ret = edu_open_clean(&e8, EDU_SLOT_B);
	ASSERT_EQ(0, ret);
	ASSERT_EQ(0, edu_bind(&e8, "uio_pci_generic"));
	fd2 = open("/dev/uli", O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, fd2);
	r = self->r;
	r.bus = e8.bus;
	r.devfn = e8.devfn;
	EXPECT_EQ(EBUSY, reg(fd2, &r));
	r.source = ULI_SOURCE_PCI_MSI;
	EXPECT_EQ(EBUSY, reg(fd2, &r));
	close(fd2);
	edu_bind(&e8, NULL);
	edu_close_clean(&e8);
}

/*
 * Released, the device is free for a kernel driver again, whichever
 * source was used: MSI setup left device-managed resources behind, with
 * which uio_pci_generic's probe failed ("Resources present before
 * probing").
 */
TEST_F(err, released_device_binds)
{
	static const __u32 sources[] = { ULI_SOURCE_PCI_MSI, ULI_SOURCE_PCI_INTX };
	unsigned int i;

	for (i = 0; i < 2; i++) {
		struct uli_register r = self->r;
		int fd = open("/dev/uli", O_RDWR | O_CLOEXEC);

		ASSERT_LE(0, fd);
		r.source = sources[i];
		ASSERT_EQ(0, reg(fd, &r));
		close(fd);
		EXPECT_EQ(0, edu_bind(&self->e, "uio_pci_generic")) TH_LOG("source %u", r.source);
		edu_bind(&self->e, NULL);
		edu_close_clean(&self->e);
		ASSERT_EQ(0, edu_open_clean(&self->e, EDU_SLOT_C));
	}
}

/*
 * The line held by a user that does not share (the /proc method's
 * exclusive claim): an IRQ or INTx registration is EBUSY.  The refused
 * INTx one leaves the device's INTx off, also when it was on before: a
 * device raised during the attempt and let go of with INTx on floods a
 * line that nobody serves it on (the long fuzz run's "irq 11: nobody
 * cared").  A later claim turns it on again.
 */
TEST_F(err, line_held)
{
	struct uli_register r = self->r;
	int pfd;

	pfd = t_irq_open(self->e.irq, O_NONBLOCK);
	ASSERT_LE(0, pfd) TH_LOG("/proc/irq/%d/irq: %s", self->e.irq, strerror(-pfd));
	t_irq_read4(pfd);		/* claims the line, exclusively */
	ASSERT_EQ(0, edu_set_intx(&self->e, true));
	EXPECT_EQ(EBUSY, reg(self->fd, &r));
	EXPECT_EQ(0, edu_intx_enabled(&self->e)) TH_LOG("INTx left on");
	r.source = ULI_SOURCE_IRQ;
	r.irq = self->e.irq;
	r.domain = r.bus = r.devfn = 0;
	EXPECT_EQ(EBUSY, reg(self->fd, &r));
	close(pfd);
	/* Free again: the same file registers, with INTx on. */
	EXPECT_EQ(0, reg(self->fd, &self->r));
	EXPECT_EQ(1, edu_intx_enabled(&self->e));
}

/*
 * The reverse, for the /proc method: a description of edu@5 is refused
 * at request_irq() because a registration holds the line unshared.  The
 * claim must leave INTx off, as a release does: a device raised
 * meanwhile would otherwise assert a line nobody serves.
 */
TEST_F(err, proc_claim_refused)
{
	struct uli_register r = self->r;
	struct irq_user_dev d;
	int pfd;

	pfd = t_irq_open(self->e.irq, O_NONBLOCK);	/* open, not claimed */
	ASSERT_LE(0, pfd) TH_LOG("/proc/irq/%d/irq: %s", self->e.irq, strerror(-pfd));
	r.source = ULI_SOURCE_IRQ;
	r.irq = self->e.irq;
	r.domain = r.bus = r.devfn = 0;
	ASSERT_EQ(0, reg(self->fd, &r));
	ASSERT_EQ(0, edu_set_intx(&self->e, true));
	edu_describe_intx(&self->e, &d);
	EXPECT_EQ(-EBUSY, t_irq_set_device(pfd, &d));
	EXPECT_EQ(0, edu_intx_enabled(&self->e)) TH_LOG("INTx left on");
	ASSERT_EQ(0, edu_set_intx(&self->e, true));
	edu_describe_mmio(&self->e, &d);
	EXPECT_EQ(-EBUSY, t_irq_set_device(pfd, &d));
	EXPECT_EQ(0, edu_intx_enabled(&self->e)) TH_LOG("INTx left on");
	EXPECT_FALSE(t_irq_has_action(self->e.irq, t_irq_user_name()));
	/* The line free again: the same file claims it, and turns INTx on. */
	close(self->fd);
	self->fd = -1;
	ASSERT_EQ(0, t_irq_set_device(pfd, &d));
	EXPECT_EQ(1, edu_intx_enabled(&self->e));
	close(pfd);
}

/* Root without CAP_SYS_RAWIO cannot open /dev/uli. */
TEST_F(err, no_rawio_eperm)
{
	struct __user_cap_data_struct d[2];
	int status, fd;
	pid_t pid = fork();

	ASSERT_LE(0, pid);
	if (pid == 0) {
		if (t_caps_get(d))
			_exit(100);
		t_cap_clear(d, CAP_SYS_RAWIO);
		if (t_caps_set(d))
			_exit(101);
		fd = open("/dev/uli", O_RDWR);
		_exit(fd < 0 ? errno : 0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(EPERM, WEXITSTATUS(status));
}

/*
 * More of a CPU is the registration's privilege, checked at use: a holder
 * of the file without CAP_SYS_RAWIO may not change the share.
 */
TEST_F(err, share_needs_rawio)
{
	struct __user_cap_data_struct d[2];
	__u32 share = ULI_SHARE_MAX;
	int status;
	pid_t pid;

	ASSERT_EQ(0, reg(self->fd, &self->r));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		if (t_caps_get(d))
			_exit(100);
		t_cap_clear(d, CAP_SYS_RAWIO);
		if (t_caps_set(d))
			_exit(101);
		_exit(ioctl(self->fd, ULI_IOC_SET_SHARE, &share) ? errno : 0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(EPERM, WEXITSTATUS(status));
	EXPECT_EQ(0, ioctl(self->fd, ULI_IOC_SET_SHARE, &share));
}

/*
 * libuli refuses a handler stack it cannot make resident (a hole, a
 * read-only page) with EFAULT, as the kernel does, instead of faulting
 * in the caller; and it checks its arguments before it touches the
 * device.  Both delivery methods.
 */
static void handler(void *arg)
{
	(void)arg;
}

TEST_F(err, libuli_bad_stack)
{
	char *stack = self->stack;

	ASSERT_EQ(0, mprotect(stack, STACK_SIZE, PROT_READ));
	errno = 0;
	EXPECT_EQ(NULL, ULI_register_pci(self->e.bdf, handler, NULL, 0, stack, STACK_SIZE, ULI_INTX));
	EXPECT_EQ(EFAULT, errno);
	/* A hole: PROT_NONE, which an mmap() of libuli's cannot fill. */
	ASSERT_EQ(0, mprotect(stack, STACK_SIZE, PROT_READ | PROT_WRITE));
	ASSERT_EQ(0, mprotect(stack + 4096, 4096, PROT_NONE));
	errno = 0;
	EXPECT_EQ(NULL, ULI_register_pci(self->e.bdf, handler, NULL, 0, stack, STACK_SIZE, ULI_INTX));
	EXPECT_EQ(EFAULT, errno);
	EXPECT_FALSE(t_irq_has_action(self->e.irq, "uli"));
}

TEST_F(err, libuli_args_before_device)
{
	char path[96], before[16] = "", after[16] = "";

	/* sysfs "enable" shows the enable count: a refused call leaves it. */
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/enable", self->e.bdf);
	ASSERT_LT(0, t_read_file(path, before, sizeof(before)));
	errno = 0;
	EXPECT_EQ(NULL, ULI_register_pci(self->e.bdf, NULL, NULL, 0, NULL, 0, ULI_INTX));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(NULL, ULI_register_pci(self->e.bdf, handler, NULL, -1, NULL, 0, ULI_INTX));
	EXPECT_EQ(EINVAL, errno);
	ASSERT_LT(0, t_read_file(path, after, sizeof(after)));
	EXPECT_STREQ(before, after);
}

/*
 * libuli reads a PCI address as the kernel names its devices,
 * "DDDD:BB:SS.F" or "BB:SS.F", hex digits, at most 4, 2, 2 and 1 of
 * them, and nothing else.  Each of these, all close to edu@5's name,
 * is EINVAL from both functions in both methods, before the device is
 * touched: no registration, nothing on the line, the enable count as it
 * was.
 */
static const char *const bad_bdfs[] = {
	"", ":", ":.", "::.",
	"0000:00:05.0x",	/* sscanf()'s %x reads "0x" as 0 */
	"0000:00:05.0 ", "0000:00:05.0\n", "0000:00:05.0.0", "0000:00:05.0:",
	"0000:00:05.00", "0000:00:05.", "0000:00:05", "0000:00:.0",
	"0000::05.0", ":00:05.0", "00:05.0x", "00:05", "05.0", "5",
	"0000:00:20.0", "0000:00:ff.0", "0000:00:05.8", "0000:00:05.f",
	"10000:00:05.0", "00000:00:05.0", "0000:100:05.0", "0000:000:05.0",
	"0000:00:005.0", "000:05.0", "0:0:0:05.0",
	" 0000:00:05.0", "0000: 00:05.0", "0000:00: 5.0", "0000:00:05. 0",
	"+0000:00:05.0", "0000:+0:05.0", "0000:00:-5.0", "0000:00:05.+0",
	"0x0:00:05.0", "0000:0x:05.0", "0000:00:0x5.0", "0000:00:05.0x0",
	"00:0x5.0", "0X0:00:05.0",
	"g000:00:05.0", "0000:0g:05.0", "0000;00:05.0", "0000:00.05.0",
	"0000:00:05:0", "0000-00-05.0",
};

/* Nothing of a registration anywhere: none listed, none on the line. */
static bool none_made(const struct edu *e, int regs)
{
	return t_registrations() == regs && !t_irq_has_action(e->irq, "uli") &&
	       !t_irq_has_action(e->irq, t_irq_user_name());
}

TEST_F(err, libuli_bad_address)
{
	char path[96], before[16] = "", after[16] = "";
	int regs = t_registrations();
	unsigned int i;
	void *u;

	ASSERT_STREQ("0000:00:05.0", self->e.bdf);	/* what bad_bdfs[] spoil */
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/enable", self->e.bdf);
	ASSERT_LT(0, t_read_file(path, before, sizeof(before)));
	for (i = 0; i < ARRAY_SIZE(bad_bdfs); i++) {
		errno = 0;
		u = ULI_register_pci(bad_bdfs[i], handler, NULL, 0, NULL, 0, ULI_INTX);
		EXPECT_EQ(NULL, u) TH_LOG("ULI_register_pci(\"%s\") registered", bad_bdfs[i]);
		EXPECT_EQ(EINVAL, errno) TH_LOG("ULI_register_pci(\"%s\"): %s",
						bad_bdfs[i], strerror(errno));
		if (u)
			ULI_destroy(u);
		errno = 0;
		u = ULI_register_mmio(bad_bdfs[i], &edu_uli_regs, handler, NULL, 0, NULL, 0);
		EXPECT_EQ(NULL, u) TH_LOG("ULI_register_mmio(\"%s\") registered", bad_bdfs[i]);
		EXPECT_EQ(EINVAL, errno) TH_LOG("ULI_register_mmio(\"%s\"): %s",
						bad_bdfs[i], strerror(errno));
		if (u)
			ULI_destroy(u);
		EXPECT_TRUE(none_made(&self->e, regs)) TH_LOG("\"%s\" left something", bad_bdfs[i]);
	}
	ASSERT_LT(0, t_read_file(path, after, sizeof(after)));
	EXPECT_STREQ(before, after);
	EXPECT_EQ(NULL, ULI_register_pci(NULL, handler, NULL, 0, NULL, 0, ULI_INTX));
	EXPECT_EQ(EINVAL, errno);
}

/*
 * The names that are edu@5's register it, in both forms and with fewer
 * digits; well-formed names of devices that are not there, hex letters
 * in either case, are ENODEV.
 */
TEST_F(err, libuli_good_address)
{
	static const char *const good[] = {
		"0000:00:05.0", "00:05.0", "0:0:5.0", "000:00:05.0", "00:5.0",
	};
	static const char *const absent[] = {
		"0000:00:1f.7", "0000:00:1F.7", "00:1f.7", "ffff:ff:1f.7",
		"FFFF:FF:1F.7", "0000:00:0a.0", "0000:00:0C.0", "abcd:ef:10.6",
	};
	unsigned int i;
	void *u;

	for (i = 0; i < ARRAY_SIZE(good); i++) {
		u = ULI_register_pci(good[i], handler, NULL, 0, NULL, 0, ULI_INTX);
		ASSERT_NE(NULL, u) TH_LOG("ULI_register_pci(\"%s\"): %s", good[i], strerror(errno));
		EXPECT_EQ(self->e.irq, ULI_irq(u)) TH_LOG("\"%s\"", good[i]);
		EXPECT_EQ(0, ULI_destroy(u));
		u = ULI_register_mmio(good[i], &edu_uli_regs, handler, NULL, 0, NULL, 0);
		ASSERT_NE(NULL, u) TH_LOG("ULI_register_mmio(\"%s\"): %s",
					  good[i], strerror(errno));
		EXPECT_EQ(self->e.irq, ULI_irq(u)) TH_LOG("\"%s\"", good[i]);
		EXPECT_EQ(0, ULI_destroy(u));
	}
	for (i = 0; i < ARRAY_SIZE(absent); i++) {
		errno = 0;
		EXPECT_EQ(NULL, ULI_register_pci(absent[i], handler, NULL, 0, NULL, 0, ULI_INTX));
		EXPECT_EQ(ENODEV, errno) TH_LOG("\"%s\": %s", absent[i], strerror(errno));
	}
}

TEST_HARNESS_MAIN
