// SPDX-License-Identifier: GPL-2.0
/*
 * proc_msi - the /proc method serving a device's MSI (IRQ_USER_DEV_PCI_MSI):
 * edu@4's file, /proc/irq/N/irq of its INTx line N, shared with edu@8
 * bound to uio_pci_generic.
 *
 * The description makes the kernel set up one MSI vector for the device
 * and count its messages; the line itself is not requested, so uio keeps
 * it alone.  Checked: the vector exists and carries our action, the line
 * does not; exact counts, alone and interleaved with uio's interrupts on
 * the line; the hard-handler stamp; non-blocking read and poll; the
 * refusals; and that closing frees the vector, gives the device back and
 * leaves its INTx off.
 */

#include <fcntl.h>
#include <poll.h>

#include "kselftest_harness.h"
#include "helpers.h"

#define N_MSI		2000

FIXTURE(msi) {
	struct edu e4, e8;
	int fd, uio;
	bool bound;
};

/* The device's driver_override, newline stripped. */
static void override(const struct edu *e, char *buf, size_t len)
{
	char path[96];

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/driver_override", e->bdf);
	if (t_read_file(path, buf, len) < 0)
		buf[0] = 0;
	buf[strcspn(buf, "\n")] = 0;
}

FIXTURE_SETUP(msi)
{
	struct irq_user_dev d;
	int ret;

	self->fd = self->uio = -1;
	self->bound = false;
	ret = edu_open_clean(&self->e4, EDU_SLOT_A);
	ASSERT_EQ(0, ret) TH_LOG("edu@%d: %s", EDU_SLOT_A, strerror(-ret));
	ret = edu_open_clean(&self->e8, EDU_SLOT_B);
	ASSERT_EQ(0, ret) TH_LOG("edu@%d: %s", EDU_SLOT_B, strerror(-ret));
	if (self->e4.irq != self->e8.irq)
		SKIP(return, "edu@%d and edu@%d do not share a line", EDU_SLOT_A, EDU_SLOT_B);
	ret = edu_bind(&self->e8, "uio_pci_generic");
	ASSERT_EQ(0, ret) TH_LOG("bind: %s", strerror(-ret));
	self->bound = true;
	self->uio = t_uio_open(&self->e8);
	ASSERT_LE(0, self->uio) TH_LOG("uio: %s", strerror(-self->uio));

	self->fd = t_irq_open(self->e4.irq, O_NONBLOCK);
	ASSERT_LE(0, self->fd) TH_LOG("open: %s", strerror(-self->fd));
	ASSERT_EQ(0, t_msi_irq(&self->e4));
	edu_describe_msi(&self->e4, &d);
	ret = t_irq_set_device(self->fd, &d);
	ASSERT_EQ(0, ret) TH_LOG("SET_DEVICE(MSI): %s", strerror(-ret));
}

FIXTURE_TEARDOWN(msi)
{
	edu_quiet(&self->e4);
	edu_quiet(&self->e8);
	t_irq_close(&self->fd);
	t_irq_close(&self->uio);
	if (self->bound)
		edu_bind(&self->e8, NULL);
	edu_close_clean(&self->e4);
	edu_close_clean(&self->e8);
}

/* The vector is ours; the line stays uio's alone; INTx is off. */
TEST_F(msi, vector_not_line)
{
	int vec = t_msi_irq(&self->e4);
	struct irq_user_dev d;
	char buf[64];

	ASSERT_LT(0, vec) TH_LOG("no MSI vector after the description");
	EXPECT_NE(self->e4.irq, vec);
	EXPECT_TRUE(t_irq_has_action(vec, t_irq_user_name()));
	EXPECT_FALSE(t_irq_has_action(self->e4.irq, t_irq_user_name()));
	EXPECT_EQ(1, t_irq_nactions(self->e4.irq));
	EXPECT_EQ(0, edu_intx_enabled(&self->e4));
	override(&self->e4, buf, sizeof(buf));
	EXPECT_STREQ("irq-user", buf);
	/* The vector's own file is not a line: refused. */
	EXPECT_EQ(-EINVAL, t_irq_open(vec, 0));
	/* One description per file. */
	edu_describe_msi(&self->e4, &d);
	EXPECT_EQ(-EBUSY, t_irq_set_device(self->fd, &d));
}

/* Each raise is one message, counted once; the stamp follows the raise. */
TEST_F_TIMEOUT(msi, exact_counts, 240)
{
	struct irq_user_event ev;
	uint64_t last = 0;
	long r;
	int i;

	EXPECT_EQ(-EAGAIN, t_irq_read4(self->fd));
	for (i = 0; i < N_MSI; i++) {
		edu_raise(&self->e4, 1);
		ASSERT_EQ(POLLIN, t_poll(self->fd, POLLIN, 2000) & POLLIN) TH_LOG("raise %d", i);
		r = read(self->fd, &ev, sizeof(ev));
		ASSERT_EQ((long)sizeof(ev), r) TH_LOG("raise %d: %s", i, strerror(errno));
		ASSERT_EQ(1u, ev.count) TH_LOG("raise %d", i);
		EXPECT_EQ(0u, ev.status);
		ASSERT_LT(last, ev.cycles) TH_LOG("raise %d: stamp not after the last", i);
		last = ev.cycles;
		edu_ack(&self->e4, 1);
	}
	EXPECT_EQ(-EAGAIN, t_irq_read4(self->fd));
}

/*
 * Raised while nobody reads: every message the CPU takes is counted once,
 * none lost or doubled.  The next raise waits until the kernel has taken
 * the last one: a message that arrives while the vector is still pending
 * in the target CPU's IRR is merged into it by the local APIC (a host
 * stall of that vCPU does this), which no kernel method can count.
 */
TEST_F(msi, batched)
{
	int vec = t_msi_irq(&self->e4);
	unsigned long long base;
	int i, n, total = 0;

	ASSERT_LT(0, vec);
	base = t_irq_total(vec);
	for (i = 0; i < 50; i++) {
		int w;

		edu_raise(&self->e4, 1);
		for (w = 0; w < 2000 && t_irq_total(vec) < base + i + 1; w++)
			t_msleep(1);
		ASSERT_EQ(base + i + 1, t_irq_total(vec)) TH_LOG("raise %d", i);
	}
	/* /proc/interrupts counts before the action has run: let it finish. */
	for (i = 0; i < 100 && total < 50; i++) {
		n = t_irq_read4(self->fd);
		if (n > 0)
			total += n;
		else
			t_msleep(20);
	}
	EXPECT_EQ(50, total);
	t_msleep(20);
	EXPECT_EQ(-EAGAIN, t_irq_read4(self->fd));
	edu_ack(&self->e4, ~0u);
}

/* The MSI and uio's INTx on the line: each sees exactly its own. */
TEST_F_TIMEOUT(msi, beside_uio, 240)
{
	long n;
	int i;

	for (i = 0; i < 1000; i++) {
		edu_raise(&self->e8, 1);
		edu_raise(&self->e4, 1);
		n = t_uio_wait(self->uio, 2000);
		ASSERT_LT(0, n) TH_LOG("round %d: uio %s", i, strerror((int)-n));
		ASSERT_EQ(POLLIN, t_poll(self->fd, POLLIN, 2000) & POLLIN) TH_LOG("round %d", i);
		ASSERT_EQ(1, t_irq_read4(self->fd)) TH_LOG("round %d", i);
		edu_ack(&self->e4, 1);
		edu_ack(&self->e8, 1);
		ASSERT_EQ(0, edu_set_intx(&self->e8, true));
	}
	EXPECT_EQ(0, t_irq_ddepth(self->e4.irq));
	EXPECT_EQ(-EAGAIN, t_irq_read4(self->fd));
}

/* Closing frees the vector and the device; INTx stays off; uio goes on. */
TEST_F(msi, close_releases)
{
	struct irq_user_dev d;
	char buf[64];
	int vec = t_msi_irq(&self->e4);
	long n;

	ASSERT_LT(0, vec);
	edu_raise(&self->e4, 1);
	ASSERT_EQ(POLLIN, t_poll(self->fd, POLLIN, 2000) & POLLIN);
	t_irq_close(&self->fd);
	EXPECT_EQ(0, t_msi_irq(&self->e4));
	EXPECT_EQ(0, edu_intx_enabled(&self->e4));
	override(&self->e4, buf, sizeof(buf));
	EXPECT_STREQ("(null)", buf);
	EXPECT_EQ(1, t_irq_nactions(self->e4.irq));
	/* A device still pending from before does not reach the line. */
	EXPECT_EQ(0, t_irq_ddepth(self->e4.irq));
	edu_raise(&self->e8, 1);
	n = t_uio_wait(self->uio, 2000);
	EXPECT_LT(0, n);
	edu_ack(&self->e8, 1);
	edu_ack(&self->e4, ~0u);

	/* And the device can be described again. */
	self->fd = t_irq_open(self->e4.irq, O_NONBLOCK);
	ASSERT_LE(0, self->fd);
	edu_describe_msi(&self->e4, &d);
	ASSERT_EQ(0, t_irq_set_device(self->fd, &d));
	EXPECT_LT(0, t_msi_irq(&self->e4));
	EXPECT_EQ(1, t_irq_cycle(&self->e4, self->fd));
}

TEST_HARNESS_MAIN
