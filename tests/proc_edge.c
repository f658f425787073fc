// SPDX-License-Identifier: GPL-2.0
/*
 * proc_edge - /proc/irq/8/irq on an edge-triggered line: the RTC's
 * periodic interrupt (ISA IRQ 8, edge on the IO-APIC), driven through
 * ports 0x70/0x71 with ioperm(); the guest kernel has no RTC driver, and
 * runs with hpet=disable (see FIXTURE_SETUP).
 *
 * An edge line is masked lazily between reads: an edge that comes while
 * it is disabled is marked pending and replayed when the reader waits
 * again, where a mask at the chip (IRQ_DISABLE_UNLAZY, used for level
 * lines) could lose it.  QEMU's IO-APIC keeps an edge that came while the
 * pin was masked, so this test shows edge lines working and nothing
 * lost, not the difference between the two masks.
 *
 *  - periodic: at 64 Hz, each read returns, each interrupt is counted;
 *  - while_masked: an edge that comes between reads, while the line is
 *    disabled, is marked pending and reported by the next read at once;
 *  - blocked_reader: a reader blocked in read() before the RTC is armed
 *    is woken by the first edge; after close the line has no action and
 *    serves a new reader.
 */
#include <pthread.h>
#include <sys/io.h>

#include "kselftest_harness.h"
#include "helpers.h"

#define RTC_IRQ		8
#define RTC_HZ		64
#define RTC_RATE_64HZ	0x0a	/* register A: 32.768 kHz base, RS = 10 */
#define RTC_SLOW_HZ	16
#define RTC_RATE_16HZ	0x0c	/* RS = 12 */

static uint8_t cmos_read(uint8_t reg)
{
	outb(reg, 0x70);
	return inb(0x71);
}

static void cmos_write(uint8_t reg, uint8_t val)
{
	outb(reg, 0x70);
	outb(val, 0x71);
}

/*
 * Periodic interrupts at the rate RS (register A), or off with RS 0;
 * register C read, which re-arms the RTC.
 */
static void rtc_periodic_rate(uint8_t rs)
{
	bool on = rs;
	uint8_t b = cmos_read(0x0b);

	if (on)
		cmos_write(0x0a, (cmos_read(0x0a) & 0xf0) | rs);
	cmos_write(0x0b, on ? b | 0x40 : b & ~0x40);
	cmos_read(0x0c);
}

static void rtc_periodic(bool on)
{
	rtc_periodic_rate(on ? RTC_RATE_64HZ : 0);
}

/* Whether the line's debugfs state lists flag (an IRQD_ or IRQS_ name). */
static bool line_has(int irq, const char *flag)
{
	char path[64], buf[4096];

	snprintf(path, sizeof(path), T_DEBUGFS_IRQS "/%d", irq);
	return t_read_file(path, buf, sizeof(buf)) > 0 && strstr(buf, flag);
}

FIXTURE(edge) {
	int fd;
};

FIXTURE_SETUP(edge)
{
	char cmdline[512];

	self->fd = -1;
	/*
	 * With an HPET in legacy replacement mode (Linux's default where
	 * there is one), IRQ 8 is the HPET's and the RTC's output goes
	 * nowhere.  make test runs this in a boot with hpet=disable.
	 */
	if (t_read_file("/proc/cmdline", cmdline, sizeof(cmdline)) <= 0 ||
	    !strstr(cmdline, "hpet=disable"))
		SKIP(return, "IRQ 8 is the HPET's here: boot with hpet=disable");
	if (ioperm(0x70, 2, 1))
		SKIP(return, "ioperm: %s", strerror(errno));
	self->fd = t_irq_open(RTC_IRQ, 0);
	if (self->fd == -ENODEV || self->fd == -EBUSY || self->fd == -ENOENT)
		SKIP(return, "IRQ %d not available: %s", RTC_IRQ, strerror(-self->fd));
	ASSERT_LE(0, self->fd) TH_LOG("open: %s", strerror(-self->fd));
	ASSERT_FALSE(line_has(RTC_IRQ, "IRQD_LEVEL")) TH_LOG("IRQ %d is level-triggered here", RTC_IRQ);
}

FIXTURE_TEARDOWN(edge)
{
	rtc_periodic(false);
	if (self->fd >= 0)
		close(self->fd);
}

TEST_F(edge, periodic)
{
	uint64_t t0, ms;
	long n, total = 0, reads = 0;

	rtc_periodic(true);
	t0 = t_now_ns();
	while (t_ms_since(t0) < 1000) {
		n = t_irq_read4(self->fd);
		ASSERT_LT(0, n) TH_LOG("read: %s", strerror((int)-n));
		cmos_read(0x0c);	/* acknowledge: the RTC raises the next one */
		total += n;
		reads++;
	}
	ms = t_ms_since(t0);
	TH_LOG("%ld interrupts in %ld reads, %llu ms", total, reads, (unsigned long long)ms);
	/* Each interrupt waits for its acknowledgement: one per read. */
	EXPECT_EQ(reads, total);
	EXPECT_LE(RTC_HZ * ms / 1000 / 2, (uint64_t)total);
	EXPECT_GE(RTC_HZ * ms / 1000 + 2, (uint64_t)total);
}

TEST_F(edge, while_masked)
{
	const unsigned int period_ms = 1000 / RTC_SLOW_HZ;
	uint64_t t0;
	long n;
	int i;

	/*
	 * A slow rate, so that "at once" and "at the next period" stay far
	 * apart on a loaded host; the pending flag is the exact check.
	 */
	rtc_periodic_rate(RTC_RATE_16HZ);
	ASSERT_LT(0, t_irq_read4(self->fd));
	for (i = 0; i < 10; i++) {
		/* Re-armed while no reader waits: the edge finds the line disabled. */
		cmos_read(0x0c);
		t_msleep(2 * period_ms);
		ASSERT_EQ(1, t_irq_ddepth(RTC_IRQ)) TH_LOG("the line is not disabled between reads");
		EXPECT_TRUE(line_has(RTC_IRQ, "IRQS_PENDING"))
			TH_LOG("round %d: the edge is not marked pending", i);
		t0 = t_now_ns();
		n = t_irq_read4(self->fd);
		EXPECT_EQ(1, n) TH_LOG("round %d: %ld", i, n);
		/* Replayed at once, not at the RTC's next period (it waits for its ack). */
		EXPECT_GT(period_ms / 2, t_ms_since(t0)) TH_LOG("round %d: an edge lost", i);
	}
}

struct reader {
	int fd;
	long ret;
};

static void *reader_main(void *p)
{
	struct reader *c = p;

	c->ret = t_irq_read4(c->fd);
	return NULL;
}

TEST_F(edge, blocked_reader)
{
	struct reader c = { .fd = self->fd, .ret = 0 };
	pthread_t t;
	int fd;

	rtc_periodic(false);
	ASSERT_EQ(0, pthread_create(&t, NULL, reader_main, &c));
	t_msleep(100);
	/* The periodic interrupt wakes the blocked reader. */
	rtc_periodic(true);
	ASSERT_EQ(0, pthread_join(t, NULL));
	EXPECT_LT(0, c.ret);
	rtc_periodic(false);
	close(self->fd);
	self->fd = -1;
	EXPECT_EQ(0, t_irq_nactions(RTC_IRQ));
	/* The line is free again, and as usable. */
	fd = t_irq_open(RTC_IRQ, 0);
	ASSERT_LE(0, fd);
	rtc_periodic(true);
	EXPECT_LT(0, t_irq_read4(fd));
	rtc_periodic(false);
	close(fd);
}

TEST_HARNESS_MAIN
