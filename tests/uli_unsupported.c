// SPDX-License-Identifier: GPL-2.0
/*
 * uli_unsupported - where the kernel cannot run handlers, /dev/uli says so
 * and nothing else changes.  A PREEMPT_RT kernel (make test-rt) refuses
 * every registration with EOPNOTSUPP, before looking at its fields, and
 * libuli's upcall method reports the same errno, while its /proc method
 * serves the same program.  Elsewhere (a kernel with Xen PV, SEV and TDX
 * guest support compiled in, booted on plain QEMU) registrations work.
 */
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <linux/uli.h>

#include "kselftest_harness.h"
#include "helpers.h"

#define STACK_SIZE	(64 * 1024)

static struct edu e;
static volatile uint64_t calls;

static void handler(void *arg)
{
	edu_ack(&e, edu_status(&e));
	calls++;
}

static void entry(void)
{
}

static bool preempt_rt(void)
{
	struct utsname u;

	return !uname(&u) && strstr(u.version, "PREEMPT_RT");
}

/* ULI_IOC_REGISTER of edu@5 by INTx masking, with @r spoilt or not. */
static int raw_register(const struct edu *e, bool spoil)
{
	struct uli_register r = {
		.source = ULI_SOURCE_PCI_INTX,
		.domain = e->domain,
		.bus = e->bus,
		.devfn = e->devfn,
		.entry = (unsigned long)entry,
		.stack_size = STACK_SIZE,
	};
	void *stack = mmap(NULL, STACK_SIZE, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	int fd, err;

	if (stack == MAP_FAILED)
		return errno;
	r.stack = (unsigned long)stack;
	if (spoil)
		r.flags = 0x80;		/* EINVAL where registrations are offered */
	fd = open("/dev/uli", O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		err = errno;
	} else {
		err = ioctl(fd, ULI_IOC_REGISTER, &r) ? errno : 0;
		close(fd);
	}
	munmap(stack, STACK_SIZE);
	return err;
}

TEST(refused_on_preempt_rt)
{
	void *uli;

	if (!preempt_rt())
		SKIP(return, "not a PREEMPT_RT kernel");
	ASSERT_EQ(0, edu_open_clean(&e, EDU_SLOT_C));
	/* Refused before the fields are looked at, and nothing claimed. */
	EXPECT_EQ(EOPNOTSUPP, raw_register(&e, false));
	EXPECT_EQ(EOPNOTSUPP, raw_register(&e, true));
	EXPECT_FALSE(t_irq_has_action(e.irq, "uli"));
	EXPECT_EQ(0, t_registrations());

	/* libuli's methods: the upcall says why; /proc serves the handler. */
	setenv("ULI_MODE", "upcall", 1);
	uli = ULI_register_pci(e.bdf, handler, NULL, 0, NULL, 0, ULI_INTX);
	EXPECT_EQ(NULL, uli);
	EXPECT_EQ(EOPNOTSUPP, errno);
	setenv("ULI_MODE", "proc", 1);
	uli = ULI_register_pci(e.bdf, handler, NULL, 0, NULL, 0, ULI_INTX);
	ASSERT_NE(NULL, uli) TH_LOG("ULI_MODE=proc: %s", strerror(errno));
	EXPECT_EQ(100, t_raise_each(&e, &calls, 100, 2000));
	ULI_destroy(uli);
	edu_close_clean(&e);
}

TEST(offered_on_plain_qemu)
{
	if (preempt_rt())
		SKIP(return, "a PREEMPT_RT kernel refuses registrations");
	ASSERT_EQ(0, edu_open_clean(&e, EDU_SLOT_C));
	/* The field check answers, not the refusal: the kernel offers ULI. */
	EXPECT_EQ(EINVAL, raw_register(&e, true));
	edu_close_clean(&e);
}

TEST_HARNESS_MAIN
