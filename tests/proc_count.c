// SPDX-License-Identifier: GPL-2.0
/*
 * proc_count - exact interrupt counts with a device description, on
 * edu@5.
 *
 * With an MMIO description the kernel acknowledges the device itself and
 * never masks the line, so no interrupt is lost even with no reader:
 * raise, wait until the status reads 0 (the kernel acknowledged it),
 * repeat; the counts add up exactly, with and without a concurrent
 * reader.  With a PCI INTx description each raise / read / ack cycle
 * counts exactly one, whether the interrupt came through the hard handler
 * (the reader had unmasked the device first) or was found pending when
 * the reader unmasked.
 */
#include <fcntl.h>
#include <poll.h>

#include "kselftest_harness.h"
#include "helpers.h"

#define N_MMIO	100000
#define N_INTX	10000

FIXTURE(cnt) {
	struct edu e;
	int fd;
};

FIXTURE_SETUP(cnt)
{
	int ret;

	self->fd = -1;
	ret = edu_open_clean(&self->e, EDU_SLOT_C);
	ASSERT_EQ(0, ret) TH_LOG("edu@%d: %s", EDU_SLOT_C, strerror(-ret));
	ASSERT_GT(self->e.irq, 0);
	ret = t_line_flush(&self->e);
	ASSERT_EQ(0, ret) TH_LOG("flush irq %d: %s", self->e.irq, strerror(-ret));
}

FIXTURE_TEARDOWN(cnt)
{
	edu_quiet(&self->e);
	t_irq_close(&self->fd);
	edu_close_clean(&self->e);
}

static int open_described(struct edu *e, bool mmio, int flags)
{
	struct irq_user_dev d;
	int fd = t_irq_open(e->irq, flags), ret;

	if (fd < 0)
		return fd;
	if (mmio)
		edu_describe_mmio(e, &d);
	else
		edu_describe_intx(e, &d);
	ret = t_irq_set_device(fd, &d);
	if (ret) {
		close(fd);
		return ret;
	}
	return fd;
}

/* Raise @n times, each time until the kernel acknowledged it; -1 or the failed index. */
static int raise_n(const struct edu *e, int n, uint32_t bits)
{
	int i;

	for (i = 0; i < n; i++) {
		edu_raise(e, bits);
		if (!edu_wait_clear(e, 2000))
			return i;
	}
	return -1;
}

/* 100,000 interrupts, no reader: one read returns them all. */
TEST_F_TIMEOUT(cnt, mmio_no_reads, 180)
{
	struct irq_user_event ev;
	unsigned long long before, after;
	unsigned int scount, unh;
	uint64_t t0;
	int failed;

	self->fd = open_described(&self->e, true, O_NONBLOCK);
	ASSERT_LE(0, self->fd) TH_LOG("SET_DEVICE: %s", strerror(-self->fd));
	EXPECT_TRUE(t_irq_has_action(self->e.irq, t_irq_user_name()));
	/* Shared and enabled: never masked. */
	EXPECT_EQ(0, t_irq_ddepth(self->e.irq));
	/* Nothing yet. */
	EXPECT_EQ(-EAGAIN, t_irq_read_ev(self->fd, &ev));

	before = t_irq_total(self->e.irq);
	t0 = t_now_ns();
	failed = raise_n(&self->e, N_MMIO, 1);
	ASSERT_EQ(-1, failed) TH_LOG("raise %d not acknowledged by the kernel", failed);
	TH_LOG("%d raises in %llu ms", N_MMIO, (unsigned long long)t_ms_since(t0));
	EXPECT_EQ(0, t_irq_ddepth(self->e.irq));

	/* The handler counts just after its acknowledge: let it finish. */
	t_msleep(20);
	memset(&ev, 0xa5, sizeof(ev));
	ASSERT_EQ(8, t_irq_read_ev(self->fd, &ev));
	EXPECT_EQ((uint32_t)N_MMIO, ev.count);
	EXPECT_EQ(1u, ev.status);
	/* None invented. */
	EXPECT_EQ(-EAGAIN, t_irq_read_ev(self->fd, &ev));

	after = t_irq_total(self->e.irq);
	EXPECT_LE(before + N_MMIO, after) TH_LOG("line counted %llu", after - before);
	ASSERT_EQ(0, t_irq_spurious(self->e.irq, &scount, &unh));
	EXPECT_GT(1000u, unh) TH_LOG("unhandled %u", unh);
	EXPECT_EQ(0, t_irq_ddepth(self->e.irq));
}

/* The status word is the OR of the bits the kernel acknowledged. */
TEST_F(cnt, mmio_status_bits)
{
	struct irq_user_event ev;

	self->fd = open_described(&self->e, true, O_NONBLOCK);
	ASSERT_LE(0, self->fd);

	edu_raise(&self->e, 0x1);
	ASSERT_TRUE(edu_wait_clear(&self->e, 2000));
	edu_raise(&self->e, 0x4);
	ASSERT_TRUE(edu_wait_clear(&self->e, 2000));
	edu_raise(&self->e, 0x100 | 0x80000000u);
	ASSERT_TRUE(edu_wait_clear(&self->e, 2000));
	t_msleep(5);
	ASSERT_EQ(8, t_irq_read_ev(self->fd, &ev));
	EXPECT_EQ(3u, ev.count);
	EXPECT_EQ(0x80000105u, ev.status);

	/* Cleared by the read. */
	edu_raise(&self->e, 0x2);
	ASSERT_TRUE(edu_wait_clear(&self->e, 2000));
	ASSERT_EQ(POLLIN, t_poll(self->fd, POLLIN, 1000));
	ASSERT_EQ(8, t_irq_read_ev(self->fd, &ev));
	EXPECT_EQ(1u, ev.count);
	EXPECT_EQ(0x2u, ev.status);

	/* A 4-byte read gets the count and drops the status too. */
	edu_raise(&self->e, 0x8);
	ASSERT_TRUE(edu_wait_clear(&self->e, 2000));
	ASSERT_EQ(POLLIN, t_poll(self->fd, POLLIN, 1000));
	EXPECT_EQ(1, t_irq_read4(self->fd));
	edu_raise(&self->e, 0x10);
	ASSERT_TRUE(edu_wait_clear(&self->e, 2000));
	ASSERT_EQ(POLLIN, t_poll(self->fd, POLLIN, 1000));
	ASSERT_EQ(8, t_irq_read_ev(self->fd, &ev));
	EXPECT_EQ(1u, ev.count);
	EXPECT_EQ(0x10u, ev.status);
}

struct reader {
	int fd;
	volatile int stop;
	unsigned long long sum;
	unsigned long reads, max, bad_status;
	long err;
};

/* Read until told to stop and then quiet for 200 ms. */
static void *reader_fn(void *arg)
{
	struct reader *r = arg;
	struct irq_user_event ev;
	long n;
	int p;

	for (;;) {
		p = t_poll(r->fd, POLLIN, 200);
		if (p < 0) {
			r->err = p;
			return NULL;
		}
		if (!p) {
			if (__atomic_load_n(&r->stop, __ATOMIC_SEQ_CST))
				return NULL;
			continue;
		}
		n = t_irq_read_ev(r->fd, &ev);
		if (n != 8) {
			r->err = n < 0 ? n : -EIO;
			return NULL;
		}
		r->sum += ev.count;
		r->reads++;
		if (ev.count > r->max)
			r->max = ev.count;
		if (ev.status != 1)
			r->bad_status++;
	}
}

/* 100,000 interrupts while a thread reads: the counts add up. */
TEST_F_TIMEOUT(cnt, mmio_concurrent_reader, 180)
{
	struct reader r = { 0 };
	struct irq_user_event ev;
	pthread_t th;
	uint64_t t0;
	int failed;

	self->fd = open_described(&self->e, true, O_NONBLOCK);
	ASSERT_LE(0, self->fd);
	r.fd = self->fd;
	ASSERT_EQ(0, pthread_create(&th, NULL, reader_fn, &r));

	t0 = t_now_ns();
	failed = raise_n(&self->e, N_MMIO, 1);
	__atomic_store_n(&r.stop, 1, __ATOMIC_SEQ_CST);
	pthread_join(th, NULL);
	ASSERT_EQ(-1, failed) TH_LOG("raise %d not acknowledged by the kernel", failed);
	TH_LOG("%d raises in %llu ms, %lu reads, at most %lu per read",
	       N_MMIO, (unsigned long long)t_ms_since(t0), r.reads, r.max);
	ASSERT_EQ(0, r.err) TH_LOG("reader: %s", strerror((int)-r.err));
	EXPECT_EQ((unsigned long long)N_MMIO, r.sum);
	EXPECT_LE(1ul, r.reads);
	EXPECT_EQ(0ul, r.bad_status);
	/* None invented. */
	EXPECT_EQ(-EAGAIN, t_irq_read_ev(self->fd, &ev));
	EXPECT_EQ(0, t_irq_ddepth(self->e.irq));
}

/*
 * INTx masking, the reader never waiting before the raise: the device is
 * masked (DisINTx) when it raises, the read finds it pending when it
 * would unmask it and counts it at once.
 */
TEST_F_TIMEOUT(cnt, intx_cycles, 120)
{
	uint64_t t0;
	long c;
	int i;

	self->fd = open_described(&self->e, false, 0);
	ASSERT_LE(0, self->fd) TH_LOG("SET_DEVICE: %s", strerror(-self->fd));
	EXPECT_TRUE(t_irq_has_action(self->e.irq, t_irq_user_name()));
	EXPECT_EQ(0, t_irq_ddepth(self->e.irq));

	t0 = t_now_ns();
	for (i = 0; i < N_INTX; i++) {
		edu_raise(&self->e, 1);
		c = t_irq_read4(self->fd);
		ASSERT_EQ(1, c) TH_LOG("cycle %d", i);
		edu_ack(&self->e, 1);
	}
	TH_LOG("%d cycles in %llu ms", N_INTX, (unsigned long long)t_ms_since(t0));
	ASSERT_EQ(0, t_set_nonblock(self->fd, true));
	EXPECT_EQ(-EAGAIN, t_irq_read4(self->fd));
	/* The line itself is never masked with a description. */
	EXPECT_EQ(0, t_irq_ddepth(self->e.irq));
}

/*
 * INTx masking through the hard handler: a non-blocking read unmasks the
 * device, the raise interrupts, the handler masks it and counts.  The
 * poll right after the raise races the handler (see proc_read's
 * exclusive_poll_loop): it must not count the interrupt a second time.
 */
TEST_F_TIMEOUT(cnt, intx_cycles_handler, 120)
{
	unsigned long long before, after;
	unsigned int scount, unh;
	uint64_t t0;
	long c;
	int i;

	self->fd = open_described(&self->e, false, O_NONBLOCK);
	ASSERT_LE(0, self->fd) TH_LOG("SET_DEVICE: %s", strerror(-self->fd));
	before = t_irq_total(self->e.irq);

	t0 = t_now_ns();
	for (i = 0; i < N_INTX; i++) {
		ASSERT_EQ(-EAGAIN, t_irq_read4(self->fd)) TH_LOG("cycle %d", i);
		edu_raise(&self->e, 1);
		ASSERT_EQ(POLLIN, t_poll(self->fd, POLLIN, 2000)) TH_LOG("cycle %d", i);
		c = t_irq_read4(self->fd);
		ASSERT_EQ(1, c) TH_LOG("cycle %d", i);
		edu_ack(&self->e, 1);
	}
	TH_LOG("%d cycles in %llu ms", N_INTX, (unsigned long long)t_ms_since(t0));
	EXPECT_EQ(-EAGAIN, t_irq_read4(self->fd));
	after = t_irq_total(self->e.irq);
	/* Each cycle went through the line. */
	EXPECT_LE(before + N_INTX, after) TH_LOG("line counted %llu", after - before);
	ASSERT_EQ(0, t_irq_spurious(self->e.irq, &scount, &unh));
	EXPECT_GT(1000u, unh) TH_LOG("unhandled %u", unh);
	EXPECT_EQ(0, t_irq_ddepth(self->e.irq));
}

/* INTx: the device stays masked while nobody reads; raises collapse. */
TEST_F(cnt, intx_masked_between_reads)
{
	unsigned long long before;
	int pend, ep;

	self->fd = open_described(&self->e, false, 0);
	ASSERT_LE(0, self->fd);

	/* Described, not read yet: the device is masked (DisINTx). */
	before = t_irq_total(self->e.irq);
	edu_raise(&self->e, 1);
	t_msleep(10);
	EXPECT_EQ(before, t_irq_total(self->e.irq));
	pend = edu_intx_pending(&self->e);
	EXPECT_EQ(1, pend);
	edu_raise(&self->e, 2);
	/* Found pending at the unmask: one, at once (blocking read). */
	EXPECT_EQ(1, t_irq_read4(self->fd));
	edu_ack(&self->e, 3);
	EXPECT_EQ(0, edu_intx_pending(&self->e));
	ASSERT_EQ(0, t_set_nonblock(self->fd, true));
	EXPECT_EQ(-EAGAIN, t_irq_read4(self->fd));
	/* Unmasked by that read: a raise interrupts. */
	ep = t_ep_open(self->fd);
	ASSERT_LE(0, ep);
	edu_raise(&self->e, 1);
	ASSERT_EQ(1, t_ep_wait(ep, 2000));
	close(ep);
	EXPECT_LT(before, t_irq_total(self->e.irq));
	EXPECT_EQ(1, t_irq_read4(self->fd));
	/* Masked again by the handler: more raises are one. */
	edu_raise(&self->e, 2);
	edu_raise(&self->e, 4);
	t_msleep(5);
	ASSERT_EQ(0, t_set_nonblock(self->fd, false));
	EXPECT_EQ(1, t_irq_read4(self->fd));
	edu_ack(&self->e, 7);
	ASSERT_EQ(0, t_set_nonblock(self->fd, true));
	EXPECT_EQ(-EAGAIN, t_irq_read4(self->fd));
}

/*
 * INTx: the device still asserting when a non-blocking read (or a poll
 * with timeout 0) would unmask it: that read returns the count at once,
 * it does not say EAGAIN (nothing pending) while counting it.
 */
TEST_F(cnt, intx_pending_nonblock_read)
{
	long c1, c2;
	int p, ep;

	self->fd = open_described(&self->e, false, O_NONBLOCK);
	ASSERT_LE(0, self->fd);

	/* Raised while masked (never read yet). */
	edu_raise(&self->e, 1);
	c1 = t_irq_read4(self->fd);
	EXPECT_EQ(1, c1) TH_LOG("non-blocking read, device pending: %ld", c1);
	edu_ack(&self->e, 1);
	c2 = t_irq_read4(self->fd);
	/* Counted once in all, whenever it was reported. */
	EXPECT_EQ(1, (c1 > 0 ? c1 : 0) + (c2 > 0 ? c2 : 0));
	if (c2 > 0)
		c2 = t_irq_read4(self->fd);
	EXPECT_EQ(-EAGAIN, c2);

	/* Through the handler, then not acked: poll(0) finds it pending. */
	ep = t_ep_open(self->fd);
	ASSERT_LE(0, ep);
	edu_raise(&self->e, 1);
	ASSERT_EQ(1, t_ep_wait(ep, 2000));
	close(ep);
	EXPECT_EQ(1, t_irq_read4(self->fd));
	p = t_poll(self->fd, POLLIN, 0);
	EXPECT_EQ(POLLIN, p) TH_LOG("poll(0), device still asserting: %d", p);
	EXPECT_EQ(1, t_irq_read4(self->fd));
	edu_ack(&self->e, 1);
	EXPECT_EQ(-EAGAIN, t_irq_read4(self->fd));
}

TEST_HARNESS_MAIN
