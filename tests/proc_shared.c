// SPDX-License-Identifier: GPL-2.0
/*
 * proc_shared - a shared line: edu@4 through /proc/irq/N/irq with a
 * device description (MMIO or PCI INTx variant) while edu@8, on the same
 * line, is bound to uio_pci_generic.
 *
 * Interleaved raises on both devices: each sees exactly its own
 * interrupts, the line is never disabled (debugfs ddepth 0) and the
 * spurious detector sees (almost) no unhandled interrupt.
 */
#include <fcntl.h>
#include <poll.h>

#include "kselftest_harness.h"
#include "helpers.h"

#define N_SHARED	10000

FIXTURE(sh) {
	struct edu e4, e8;
	int fd, uio, ep;
	bool bound;
};

FIXTURE_VARIANT(sh) {
	bool mmio;
};

FIXTURE_VARIANT_ADD(sh, mmio) {
	.mmio = true,
};

FIXTURE_VARIANT_ADD(sh, intx) {
	.mmio = false,
};

FIXTURE_SETUP(sh)
{
	struct irq_user_dev d;
	int ret;

	self->fd = self->uio = self->ep = -1;
	self->bound = false;
	ret = edu_open_clean(&self->e4, EDU_SLOT_A);
	ASSERT_EQ(0, ret) TH_LOG("edu@%d: %s", EDU_SLOT_A, strerror(-ret));
	/* Open (enable) edu@8 before binding: sysfs "enable" is EBUSY after. */
	ret = edu_open_clean(&self->e8, EDU_SLOT_B);
	ASSERT_EQ(0, ret) TH_LOG("edu@%d: %s", EDU_SLOT_B, strerror(-ret));
	if (self->e4.irq != self->e8.irq)
		SKIP(return, "edu@%d (irq %d) and edu@%d (irq %d) do not share",
		     EDU_SLOT_A, self->e4.irq, EDU_SLOT_B, self->e8.irq);
	ret = t_line_flush(&self->e4);
	ASSERT_EQ(0, ret) TH_LOG("flush irq %d: %s", self->e4.irq, strerror(-ret));

	ret = edu_bind(&self->e8, "uio_pci_generic");
	ASSERT_EQ(0, ret) TH_LOG("bind: %s", strerror(-ret));
	self->bound = true;
	self->uio = t_uio_open(&self->e8);
	ASSERT_LE(0, self->uio) TH_LOG("uio: %s", strerror(-self->uio));

	self->fd = t_irq_open(self->e4.irq, O_NONBLOCK);
	ASSERT_LE(0, self->fd) TH_LOG("open: %s", strerror(-self->fd));
	/* Shared with uio: the exclusive claim is refused... */
	ASSERT_EQ(POLLERR, t_poll(self->fd, POLLIN, 0) & (POLLERR | POLLIN));
	/* ...the description is not, and the failed claim changed nothing. */
	if (variant->mmio)
		edu_describe_mmio(&self->e4, &d);
	else
		edu_describe_intx(&self->e4, &d);
	ret = t_irq_set_device(self->fd, &d);
	ASSERT_EQ(0, ret) TH_LOG("SET_DEVICE: %s", strerror(-ret));
	self->ep = t_ep_open(self->fd);
	ASSERT_LE(0, self->ep);
}

FIXTURE_TEARDOWN(sh)
{
	edu_quiet(&self->e4);
	edu_quiet(&self->e8);
	t_irq_close(&self->ep);
	t_irq_close(&self->fd);
	t_irq_close(&self->uio);
	if (self->bound)
		edu_bind(&self->e8, NULL);
	edu_close_clean(&self->e4);
	edu_close_clean(&self->e8);
}

/* edu@8 through uio: raise, wait for the event, ack, unmask INTx. */
static long uio_cycle(const struct edu *e8, int uio)
{
	long c;

	edu_raise(e8, 1);
	c = t_uio_wait(uio, 2000);
	edu_ack(e8, 1);
	/* uio_pci_generic's handler masked the device with DisINTx. */
	if (edu_set_intx(e8, true))
		return -EIO;
	return c;
}

/*
 * edu@4 through our file: MMIO, raise and wait until the kernel acked
 * (1, counted by the final read); INTx, raise, wait, read, ack, re-arm.
 */
static long proc_cycle(const struct edu *e4, int fd, int ep, bool mmio)
{
	long c;

	edu_raise(e4, 1);
	if (mmio)
		return edu_wait_clear(e4, 2000) ? 1 : -ETIMEDOUT;
	/* Not poll(): see t_ep_open(). */
	if (t_ep_wait(ep, 2000) != 1) {
		edu_ack(e4, 1);
		return -ETIMEDOUT;
	}
	c = t_irq_read4(fd);
	edu_ack(e4, 1);
	/* Re-arm: unmask the device, nothing pending. */
	if (t_irq_read4(fd) != -EAGAIN)
		return -EPROTO;
	return c;
}

TEST_F_TIMEOUT(sh, interleaved, 240)
{
	unsigned long long before, after;
	unsigned int scount, unh;
	struct irq_user_event ev;
	long u0, u, p, sum = 0;
	uint64_t t0;
	int i;

	EXPECT_TRUE(t_irq_has_action(self->e4.irq, "uio_pci_generic"));
	EXPECT_TRUE(t_irq_has_action(self->e4.irq, t_irq_user_name()));
	EXPECT_EQ(2, t_irq_nactions(self->e4.irq));
	ASSERT_EQ(0, t_irq_ddepth(self->e4.irq));
	if (!variant->mmio)
		ASSERT_EQ(-EAGAIN, t_irq_read4(self->fd));	/* arm */

	u0 = t_uio_count(&self->e8);
	ASSERT_LE(0, u0);
	before = t_irq_total(self->e4.irq);
	t0 = t_now_ns();
	for (i = 0; i < N_SHARED; i++) {
		p = proc_cycle(&self->e4, self->fd, self->ep, variant->mmio);
		ASSERT_EQ(1, p) TH_LOG("edu@4, round %d", i);
		sum += p;
		u = uio_cycle(&self->e8, self->uio);
		ASSERT_EQ(u0 + i + 1, u) TH_LOG("edu@8 (uio), round %d", i);
	}
	TH_LOG("%d rounds in %llu ms", N_SHARED, (unsigned long long)t_ms_since(t0));

	if (variant->mmio) {
		t_msleep(20);
		ASSERT_EQ(8, t_irq_read_ev(self->fd, &ev));
		EXPECT_EQ((uint32_t)N_SHARED, ev.count);
		EXPECT_EQ(1u, ev.status);
	} else {
		EXPECT_EQ(N_SHARED, sum);
	}
	/* None invented, on either side. */
	EXPECT_EQ(-EAGAIN, t_irq_read_ev(self->fd, &ev));
	EXPECT_EQ(-ETIMEDOUT, t_uio_wait(self->uio, 20));
	EXPECT_EQ(u0 + N_SHARED, t_uio_count(&self->e8));

	after = t_irq_total(self->e4.irq);
	/*
	 * One line interrupt per raise, but under threadirqs, where
	 * uio_pci_generic's handler is a thread that keeps the line masked
	 * (IRQF_ONESHOT) until it has run: an assertion that comes then is
	 * taken with the next.
	 */
	if (!t_threadirqs())
		EXPECT_LE(before + 2 * N_SHARED, after) TH_LOG("line counted %llu", after - before);
	ASSERT_EQ(0, t_irq_spurious(self->e4.irq, &scount, &unh));
	TH_LOG("line: %llu interrupts, spurious: count %u unhandled %u",
	       after - before, scount, unh);
	EXPECT_GT(1000u, unh);
	/* Never disabled. */
	EXPECT_EQ(0, t_irq_ddepth(self->e4.irq));
	EXPECT_EQ(2, t_irq_nactions(self->e4.irq));
}

/*
 * Both devices asserting at once: each handler quiets its own, ours
 * counts exactly.  uio_pci_generic counts at least its own: its handler
 * (pci_check_and_mask_intx()) also claims a line interrupt that comes
 * while its device is already masked but still pending, which happens
 * here when edu@4's interrupt arrives after edu@8's was handled.
 */
TEST_F_TIMEOUT(sh, simultaneous, 120)
{
	unsigned int scount, unh;
	struct irq_user_event ev;
	long u0, uprev, u;
	int i;

	if (!variant->mmio)
		ASSERT_EQ(-EAGAIN, t_irq_read4(self->fd));
	u0 = uprev = t_uio_count(&self->e8);
	for (i = 0; i < 1000; i++) {
		edu_raise(&self->e8, 1);
		edu_raise(&self->e4, 1);
		u = t_uio_wait(self->uio, 2000);
		ASSERT_LT(uprev, u) TH_LOG("round %d", i);
		uprev = u;
		if (variant->mmio) {
			ASSERT_TRUE(edu_wait_clear(&self->e4, 2000)) TH_LOG("round %d", i);
		} else {
			ASSERT_EQ(1, t_ep_wait(self->ep, 2000)) TH_LOG("round %d", i);
			ASSERT_EQ(1, t_irq_read4(self->fd)) TH_LOG("round %d", i);
			edu_ack(&self->e4, 1);
			ASSERT_EQ(-EAGAIN, t_irq_read4(self->fd));
		}
		edu_ack(&self->e8, 1);
		ASSERT_EQ(0, edu_set_intx(&self->e8, true));
	}
	TH_LOG("uio counted %ld for 1000", uprev - u0);
	if (variant->mmio) {
		t_msleep(20);
		ASSERT_EQ(8, t_irq_read_ev(self->fd, &ev));
		EXPECT_EQ(1000u, ev.count);
	}
	EXPECT_EQ(-EAGAIN, t_irq_read_ev(self->fd, &ev));
	ASSERT_EQ(0, t_irq_spurious(self->e4.irq, &scount, &unh));
	EXPECT_GT(1000u, unh);
	EXPECT_EQ(0, t_irq_ddepth(self->e4.irq));
}

/*
 * Closing our file leaves uio's action alone; a device still asserting
 * at close is left quiet (INTx: masked with DisINTx; MMIO: acknowledged
 * by the handler), so the line does not flood with nobody serving it.
 */
TEST_F(sh, close_leaves_uio)
{
	unsigned int scount, unh0, unh;
	struct irq_user_dev d;
	long u0;
	int i, pend;

	if (!variant->mmio)
		ASSERT_EQ(-EAGAIN, t_irq_read4(self->fd));
	/* Raise edu@4 and close without reading or acking. */
	edu_raise(&self->e4, 1);
	ASSERT_EQ(1, t_ep_wait(self->ep, 2000));
	t_irq_close(&self->ep);
	t_irq_close(&self->fd);
	EXPECT_FALSE(t_irq_has_action(self->e4.irq, t_irq_user_name()));
	EXPECT_TRUE(t_irq_has_action(self->e4.irq, "uio_pci_generic"));
	EXPECT_EQ(0, t_irq_ddepth(self->e4.irq));
	if (variant->mmio) {
		EXPECT_EQ(0u, edu_status(&self->e4));
	} else {
		/* Still pending at the device, but masked from the line. */
		EXPECT_EQ(1u, edu_status(&self->e4));
		pend = edu_intx_pending(&self->e4);
		EXPECT_EQ(1, pend);
	}

	ASSERT_EQ(0, t_irq_spurious(self->e4.irq, &scount, &unh0));
	u0 = t_uio_count(&self->e8);
	for (i = 0; i < 100; i++)
		ASSERT_EQ(u0 + i + 1, uio_cycle(&self->e8, self->uio)) TH_LOG("round %d", i);
	EXPECT_EQ(-ETIMEDOUT, t_uio_wait(self->uio, 20));
	ASSERT_EQ(0, t_irq_spurious(self->e4.irq, &scount, &unh));
	EXPECT_GT(unh0 + 10, unh) TH_LOG("unhandled %u -> %u", unh0, unh);
	EXPECT_EQ(0, t_irq_ddepth(self->e4.irq));

	/* And the file can be had again. */
	edu_ack(&self->e4, 1);
	ASSERT_EQ(0, edu_set_intx(&self->e4, true));
	self->fd = t_irq_open(self->e4.irq, O_NONBLOCK);
	ASSERT_LE(0, self->fd);
	edu_describe_mmio(&self->e4, &d);
	ASSERT_EQ(0, t_irq_set_device(self->fd, &d));
	edu_raise(&self->e4, 1);
	ASSERT_TRUE(edu_wait_clear(&self->e4, 2000));
	ASSERT_EQ(POLLIN, t_poll(self->fd, POLLIN, 2000));
	EXPECT_EQ(1, t_irq_read4(self->fd));
}

TEST_HARNESS_MAIN
