// SPDX-License-Identifier: GPL-2.0
/*
 * proc_read - reading /proc/irq/N/irq in exclusive mode (no device
 * description), on edu@5, which has its line to itself.
 *
 * Exclusive mode masks the line at each interrupt and unmasks it when a
 * reader waits: so each raise / read / ack cycle counts exactly one, and
 * raises while the line is masked collapse.  The disable depth (debugfs
 * "ddepth") is 1 while masked, 0 while a reader waits or after a
 * non-blocking read found nothing.
 *
 * Every test claims the line (first read or poll) before the device
 * raises: a shut-down IO-APIC pin is left as a masked edge entry, and
 * QEMU's IO-APIC does not deliver a level that was already asserted when
 * the pin is started again (see proc_close's stale_level_at_claim).
 */
#include <fcntl.h>
#include <poll.h>
#include <sys/syscall.h>

#include "kselftest_harness.h"
#include "helpers.h"

FIXTURE(rd) {
	struct edu e;
	int fd;
};

FIXTURE_SETUP(rd)
{
	int ret;

	self->fd = -1;
	ret = edu_open_clean(&self->e, EDU_SLOT_C);
	ASSERT_EQ(0, ret) TH_LOG("edu@%d: %s", EDU_SLOT_C, strerror(-ret));
	ASSERT_GT(self->e.irq, 0);
	ret = t_line_flush(&self->e);
	ASSERT_EQ(0, ret) TH_LOG("flush irq %d: %s", self->e.irq, strerror(-ret));
	if (t_irq_ddepth(self->e.irq) < 0)
		TH_LOG("no debugfs for irq %d: depth checks fail", self->e.irq);
}

FIXTURE_TEARDOWN(rd)
{
	edu_quiet(&self->e);
	t_irq_close(&self->fd);
	edu_close_clean(&self->e);
}

/* A blocked read wakes on a raise ~10 ms later and counts 1. */
TEST_F(rd, blocking_read_wakes)
{
	struct t_raiser r;
	uint64_t t0, t1;
	long c;

	self->fd = t_irq_open(self->e.irq, 0);
	ASSERT_LE(0, self->fd) TH_LOG("open: %s", strerror(-self->fd));
	/* Nothing claimed until the first read. */
	EXPECT_FALSE(t_irq_has_action(self->e.irq, t_irq_user_name()));

	ASSERT_EQ(0, t_raise_later(&r, &self->e, 10, 1));
	t0 = t_now_ns();
	c = t_irq_read4(self->fd);
	t1 = t_now_ns();
	pthread_join(r.th, NULL);
	ASSERT_EQ(1, c);
	/*
	 * It blocked until the raise: no interrupt came from nowhere.  Told
	 * by the raiser's clock, not by the 10 ms, which a loaded host
	 * stretches for either thread.
	 */
	EXPECT_NE(0, r.raised_ns);
	EXPECT_LE(r.raised_ns, t1) TH_LOG("returned %llu ms after the read began, before the raise",
					  (unsigned long long)(t1 - t0) / 1000000);
	EXPECT_TRUE(t_irq_has_action(self->e.irq, t_irq_user_name()));
	/* Taken, not read again: masked. */
	EXPECT_EQ(1, t_irq_ddepth(self->e.irq));
	EXPECT_EQ(1, (int)edu_status(&self->e));

	edu_ack(&self->e, 1);
	/* poll unmasks, finds nothing. */
	EXPECT_EQ(0, t_poll(self->fd, POLLIN, 0));
	EXPECT_EQ(0, t_irq_ddepth(self->e.irq));

	t_irq_close(&self->fd);
	EXPECT_FALSE(t_irq_has_action(self->e.irq, t_irq_user_name()));
	/* Freed, and the line shut down (depth 1) if it was the last action. */
	if (!t_irq_nactions(self->e.irq))
		EXPECT_EQ(1, t_irq_ddepth(self->e.irq));
}

/* 8-byte reads get the event struct, 4..7 bytes the count alone. */
TEST_F(rd, event_struct)
{
	unsigned char buf[64];
	uint64_t t_raise, t_read;
	struct irq_user_event ev;
	ssize_t n;
	size_t i;
	int ep;

	self->fd = t_irq_open(self->e.irq, 0);
	ASSERT_LE(0, self->fd);
	/* Claim and unmask before the first raise; wait without racing. */
	ep = t_ep_open(self->fd);
	ASSERT_LE(0, ep);
	edu_raise(&self->e, 1);
	ASSERT_EQ(1, t_ep_wait(ep, 2000));
	close(ep);
	/* The line is masked from now on when we raise: plain reads. */
	memset(&ev, 0xa5, sizeof(ev));
	ASSERT_EQ(8, t_irq_read_ev(self->fd, &ev));
	EXPECT_EQ(1u, ev.count);
	EXPECT_EQ(0u, ev.status);	/* exclusive: the kernel reads no status */
	edu_ack(&self->e, 1);

	/* 7 bytes: the count alone, nothing written past it. */
	edu_raise(&self->e, 1);
	memset(buf, 0xa5, sizeof(buf));
	n = read(self->fd, buf, 7);
	ASSERT_EQ(4, n);
	EXPECT_EQ(1u, *(uint32_t *)buf);
	for (i = 4; i < sizeof(buf); i++)
		ASSERT_EQ(0xa5, buf[i]) TH_LOG("byte %zu written", i);
	edu_ack(&self->e, 1);

	/* 15 bytes: count and status, nothing past them. */
	edu_raise(&self->e, 1);
	memset(buf, 0xa5, sizeof(buf));
	n = read(self->fd, buf, 15);
	ASSERT_EQ(8, n);
	for (i = 8; i < sizeof(buf); i++)
		ASSERT_EQ(0xa5, buf[i]) TH_LOG("byte %zu written", i);
	edu_ack(&self->e, 1);

	/*
	 * 64 bytes: the whole struct, 16 bytes, nothing past it; cycles is
	 * the TSC of the hard handler, between our raise and our read.
	 */
	t_raise = __builtin_ia32_rdtsc();
	edu_raise(&self->e, 1);
	ASSERT_EQ(POLLIN, t_poll(self->fd, POLLIN, 2000));
	memset(buf, 0xa5, sizeof(buf));
	t_read = __builtin_ia32_rdtsc();
	n = read(self->fd, buf, sizeof(buf));
	ASSERT_EQ(16, n);
	memcpy(&ev, buf, sizeof(ev));
	EXPECT_EQ(1u, ev.count);
	EXPECT_EQ(0u, ev.status);
	EXPECT_LT(t_raise, ev.cycles);
	EXPECT_GT(t_read, ev.cycles);
	for (i = 16; i < sizeof(buf); i++)
		ASSERT_EQ(0xa5, buf[i]) TH_LOG("byte %zu written", i);
	edu_ack(&self->e, 1);

	ASSERT_EQ(0, t_set_nonblock(self->fd, true));
	EXPECT_EQ(-EAGAIN, t_irq_read4(self->fd));
	EXPECT_EQ(0, t_irq_ddepth(self->e.irq));
}

/* 10,000 x (raise, read == 1, ack); then nothing left: EAGAIN. */
TEST_F_TIMEOUT(rd, exclusive_loop, 120)
{
	unsigned long long before, after;
	unsigned int cnt0, unh0, cnt1, unh1;
	const int N = 10000;
	uint64_t t0;
	long c;
	int i;

	self->fd = t_irq_open(self->e.irq, 0);
	ASSERT_LE(0, self->fd);
	/*
	 * Claim (unmasked) and take a first interrupt without racing the
	 * handler; from then on the line is masked whenever we raise, and
	 * the read unmasks it.
	 */
	ASSERT_EQ(1, t_irq_cycle(&self->e, self->fd));
	ASSERT_EQ(1, t_irq_ddepth(self->e.irq));
	before = t_irq_total(self->e.irq);
	ASSERT_EQ(0, t_irq_spurious(self->e.irq, &cnt0, &unh0));

	t0 = t_now_ns();
	for (i = 0; i < N; i++) {
		edu_raise(&self->e, 1);
		c = t_irq_read4(self->fd);
		ASSERT_EQ(1, c) TH_LOG("cycle %d", i);
		/* The handler masked the line: depth 1 until we read again. */
		if (i % 1000 == 0)
			ASSERT_EQ(1, t_irq_ddepth(self->e.irq)) TH_LOG("cycle %d", i);
		edu_ack(&self->e, 1);
	}
	TH_LOG("%d cycles in %llu ms", N, (unsigned long long)t_ms_since(t0));

	ASSERT_EQ(0, t_set_nonblock(self->fd, true));
	EXPECT_EQ(-EAGAIN, t_irq_read4(self->fd));
	EXPECT_EQ(0, t_irq_ddepth(self->e.irq));
	after = t_irq_total(self->e.irq);
	EXPECT_LE(before + N, after) TH_LOG("line counted %llu", after - before);
	ASSERT_EQ(0, t_irq_spurious(self->e.irq, &cnt1, &unh1));
	EXPECT_GT(100u, unh1) TH_LOG("unhandled %u", unh1);
}

/*
 * The same with the line unmasked before each raise (poll with timeout
 * 0), as an event loop does: the interrupt then arrives while the reader
 * polls, and must still count exactly once.  This races the reader's
 * check (no count, line masked: unmask) against the hard handler, which
 * masks the line and counts in two separate sections of iu->lock.
 */
TEST_F_TIMEOUT(rd, exclusive_poll_loop, 120)
{
	const int N = 10000;
	uint64_t t0;
	int i, p;
	long c;

	self->fd = t_irq_open(self->e.irq, O_NONBLOCK);
	ASSERT_LE(0, self->fd);
	t0 = t_now_ns();
	for (i = 0; i < N; i++) {
		p = t_poll(self->fd, POLLIN, 0);
		ASSERT_EQ(0, p) TH_LOG("cycle %d: stale count", i);
		edu_raise(&self->e, 1);
		p = t_poll(self->fd, POLLIN, 2000);
		ASSERT_EQ(POLLIN, p) TH_LOG("cycle %d", i);
		c = t_irq_read4(self->fd);
		ASSERT_EQ(1, c) TH_LOG("cycle %d", i);
		edu_ack(&self->e, 1);
	}
	TH_LOG("%d cycles in %llu ms", N, (unsigned long long)t_ms_since(t0));
	EXPECT_EQ(-EAGAIN, t_irq_read4(self->fd));
	EXPECT_EQ(0, t_irq_ddepth(self->e.irq));
}

/*
 * The line is masked from an interrupt until the next read: raises in
 * between are not seen (acknowledged ones are lost, pending ones merge
 * into one interrupt).
 */
TEST_F(rd, masked_raises_collapse)
{
	int i, ep;

	self->fd = t_irq_open(self->e.irq, O_NONBLOCK);
	ASSERT_LE(0, self->fd);

	/* Arm: claims, unmasks, finds nothing. */
	ASSERT_EQ(-EAGAIN, t_irq_read4(self->fd));
	ASSERT_EQ(0, t_irq_ddepth(self->e.irq));
	ep = t_ep_open(self->fd);
	ASSERT_LE(0, ep);
	edu_raise(&self->e, 1);
	ASSERT_EQ(1, t_ep_wait(ep, 1000));
	ASSERT_EQ(1, t_irq_ddepth(self->e.irq));
	edu_ack(&self->e, 1);
	ASSERT_EQ(1, t_irq_read4(self->fd));

	/* Masked now: raise and ack 5 times: nothing seen. */
	for (i = 0; i < 5; i++) {
		edu_raise(&self->e, 1);
		t_msleep(1);
		edu_ack(&self->e, 1);
	}
	EXPECT_EQ(1, t_irq_ddepth(self->e.irq));
	/* This read unmasks, the device is quiet: nothing. */
	EXPECT_EQ(-EAGAIN, t_irq_read4(self->fd));
	EXPECT_EQ(0, t_irq_ddepth(self->e.irq));

	/* Three raises, the first one masks: one interrupt in all. */
	edu_raise(&self->e, 1);
	ASSERT_EQ(1, t_ep_wait(ep, 1000));
	edu_raise(&self->e, 2);
	edu_raise(&self->e, 4);
	t_msleep(5);
	EXPECT_EQ(7u, edu_status(&self->e));
	EXPECT_EQ(1, t_irq_read4(self->fd));
	EXPECT_EQ(1, t_irq_ddepth(self->e.irq));
	edu_ack(&self->e, 7);
	EXPECT_EQ(-EAGAIN, t_irq_read4(self->fd));
	EXPECT_EQ(0, t_irq_ddepth(self->e.irq));
	close(ep);
}

/* A blocked reader in a thread; the count is per file, not per reader. */
struct reader {
	int fd;
	long ret;
	pid_t tid;
	volatile int started;
};

static void *reader_fn(void *arg)
{
	struct reader *r = arg;

	r->tid = syscall(SYS_gettid);
	__atomic_store_n(&r->started, 1, __ATOMIC_SEQ_CST);
	r->ret = t_irq_read4(r->fd);
	return NULL;
}

TEST_F(rd, reader_thread)
{
	struct reader r = { .ret = -1 };
	pthread_t th;
	int i;

	self->fd = t_irq_open(self->e.irq, 0);
	ASSERT_LE(0, self->fd);
	for (i = 0; i < 20; i++) {
		r.fd = self->fd;
		r.started = 0;
		ASSERT_EQ(0, pthread_create(&th, NULL, reader_fn, &r));
		while (!__atomic_load_n(&r.started, __ATOMIC_SEQ_CST))
			t_msleep(1);
		ASSERT_TRUE(t_wait_blocked(r.tid, SYS_read, 2000));
		/* Waiting: unmasked. */
		ASSERT_EQ(0, t_irq_ddepth(self->e.irq)) TH_LOG("round %d", i);
		edu_raise(&self->e, 1);
		pthread_join(th, NULL);
		ASSERT_EQ(1, r.ret) TH_LOG("round %d", i);
		ASSERT_EQ(1, t_irq_ddepth(self->e.irq));
		edu_ack(&self->e, 1);
	}
}

TEST_HARNESS_MAIN
