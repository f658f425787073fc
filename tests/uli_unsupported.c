// SPDX-License-Identifier: GPL-2.0
/*
 * uli_unsupported - the kernel refuses registrations only where it cannot
 * run handlers (Xen PV, SEV-ES/SNP and TDX guests, which QEMU under TCG
 * is none of): a kernel with those guests' support compiled in, booted on
 * plain QEMU, offers registrations, and so does a PREEMPT_RT kernel
 * (make test-rt), where libuli's upcall method delivers by upcall.
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

TEST(offered_on_plain_qemu)
{
	ASSERT_EQ(0, edu_open_clean(&e, EDU_SLOT_C));
	/* The field check answers, not the refusal: the kernel offers ULI. */
	EXPECT_EQ(EINVAL, raw_register(&e, true));
	edu_close_clean(&e);
}

/* PREEMPT_RT: registered by the upcall method, served by upcalls. */
TEST(upcall_on_preempt_rt)
{
	struct uli_stats st;
	void *uli;

	if (!preempt_rt())
		SKIP(return, "not a PREEMPT_RT kernel");
	ASSERT_TRUE(t_uli_offered());
	ASSERT_EQ(0, edu_open_clean(&e, EDU_SLOT_C));
	setenv("ULI_MODE", "upcall", 1);
	calls = 0;
	uli = ULI_register_pci(e.bdf, handler, NULL, 0, NULL, 0, ULI_INTX);
	ASSERT_NE(NULL, uli) TH_LOG("ULI_MODE=upcall: %s", strerror(errno));
	EXPECT_EQ(100, t_raise_each(&e, &calls, 100, 2000));
	ASSERT_EQ(0, ULI_get_stats(uli, &st));
	EXPECT_EQ(100, st.calls);
	EXPECT_EQ(100, st.ctx_owner + st.ctx_other + st.ctx_idle + st.ctx_kernel);
	ULI_destroy(uli);
	EXPECT_EQ(0, t_registrations());
	edu_close_clean(&e);
}

TEST_HARNESS_MAIN
