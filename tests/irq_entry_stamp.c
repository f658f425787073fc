// SPDX-License-Identifier: GPL-2.0
/*
 * irq_entry_stamp - the benchmark-only X86_IRQ_ENTRY_STAMP list,
 * /sys/kernel/debug/x86/irq_entry_cycles ("cpu irq cycles" lines).
 *
 * The stamp of a device interrupt, the first entry of its vector since
 * the list was read (reading clears it), lies between the raise and the
 * hard handler's own stamp (the 16-byte read of /proc/irq/N/irq), on the
 * CPU the interrupt went to.  And reading the list while vectors move is
 * safe: the list is walked under the vector lock, which the vector
 * cleanup timer takes from interrupt context on the CPU whose old vector
 * it frees; a reader holding it with interrupts on deadlocked there (the
 * first version did, in the benchmark).
 */
#include <fcntl.h>
#include <poll.h>
#include <sched.h>

#include "kselftest_harness.h"
#include "helpers.h"

#define STAMPS		"/sys/kernel/debug/x86/irq_entry_cycles"

/* The stamp of @irq on @cpu, 0 if not listed; -errno if no list. */
static long long stamp(int fd, int cpu, int irq)
{
	static char buf[16384];
	unsigned long long c;
	int ccpu, cirq;
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	char *p;

	if (n < 0)
		return -errno;
	buf[n] = 0;
	for (p = buf; p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (sscanf(p, "%d %d %llu", &ccpu, &cirq, &c) == 3 &&
		    ccpu == cpu && cirq == irq)
			return (long long)c;
	return 0;
}

FIXTURE(st) {
	struct edu e;
	int fd, list;
};

FIXTURE_SETUP(st)
{
	int ret;

	self->fd = self->list = -1;
	ret = edu_open_clean(&self->e, EDU_SLOT_C);
	ASSERT_EQ(0, ret) TH_LOG("edu@%d: %s", EDU_SLOT_C, strerror(-ret));
	self->list = open(STAMPS, O_RDONLY | O_CLOEXEC);
	if (self->list < 0)
		SKIP(return, "%s: %s (no X86_IRQ_ENTRY_STAMP)", STAMPS, strerror(errno));
}

FIXTURE_TEARDOWN(st)
{
	edu_quiet(&self->e);
	t_irq_close(&self->fd);
	if (self->list >= 0)
		close(self->list);
	edu_close_clean(&self->e);
}

/*
 * raise <= entry stamp <= hard-handler stamp, on the line's CPU.  The
 * exclusive level line is entered again after its handler (QEMU's
 * IO-APIC re-delivers it; it finds the line masked): the stamp is the
 * first entry since the list was read, so that one does not count.
 */
TEST_F(st, between_raise_and_hardirq)
{
	int cpu = sysconf(_SC_NPROCESSORS_ONLN) - 1, i;
	struct irq_user_event ev;
	long long s;
	uint64_t t;

	ASSERT_EQ(0, t_set_irq_cpu(self->e.irq, cpu));
	self->fd = t_irq_open(self->e.irq, O_NONBLOCK);
	ASSERT_LE(0, self->fd);
	t_irq_read4(self->fd);	/* claims the line */
	/* An IO-APIC line moves to the new CPU at its next interrupt. */
	for (i = 0; i < 10; i++) {
		edu_raise(&self->e, 1);
		ASSERT_EQ(POLLIN, t_poll(self->fd, POLLIN, 2000) & POLLIN);
		t_irq_read4(self->fd);
		edu_ack(&self->e, 1);
		t_msleep(2);
	}
	for (i = 0; i < 200; i++) {
		stamp(self->list, cpu, self->e.irq);	/* clears older entries */
		t = t_rdtsc();
		edu_raise(&self->e, 1);
		ASSERT_EQ(POLLIN, t_poll(self->fd, POLLIN, 2000) & POLLIN);
		ASSERT_EQ((ssize_t)sizeof(ev), read(self->fd, &ev, sizeof(ev)));
		edu_ack(&self->e, 1);
		s = stamp(self->list, cpu, self->e.irq);
		ASSERT_LT(0, s) TH_LOG("irq %d not listed for CPU %d", self->e.irq, cpu);
		ASSERT_LE(t, (uint64_t)s) TH_LOG("%d: stamp before the raise", i);
		ASSERT_LE((uint64_t)s, ev.cycles) TH_LOG("%d: stamp after the hard handler's", i);
	}
}

static volatile int stop;

static void *reader(void *arg)
{
	int fd = *(int *)arg;
	long n = 0;

	while (!stop) {
		stamp(fd, 0, 0);
		n++;
	}
	return (void *)n;
}

/* Vectors moving (cleanup timers) while the list is read on both CPUs. */
TEST_F_TIMEOUT(st, read_while_vectors_move, 300)
{
	int ncpu = sysconf(_SC_NPROCESSORS_ONLN), vec, i, c;
	struct irq_user_dev d;
	pthread_t th[2];
	cpu_set_t set;
	void *n;

	if (ncpu < 2)
		SKIP(return, "needs 2 CPUs");
	self->fd = t_irq_open(self->e.irq, O_NONBLOCK);
	ASSERT_LE(0, self->fd);
	edu_describe_msi(&self->e, &d);
	ASSERT_EQ(0, t_irq_set_device(self->fd, &d));
	vec = t_msi_irq(&self->e);
	ASSERT_LT(0, vec);
	stop = 0;
	for (c = 0; c < 2; c++) {
		pthread_attr_t a;

		pthread_attr_init(&a);
		CPU_ZERO(&set);
		CPU_SET(c, &set);
		pthread_attr_setaffinity_np(&a, sizeof(set), &set);
		ASSERT_EQ(0, pthread_create(&th[c], &a, reader, &self->list));
		pthread_attr_destroy(&a);
	}
	for (i = 0; i < 2000; i++) {
		ASSERT_EQ(0, t_set_irq_cpu(vec, i & 1));
		/* A vector moves at its next interrupt; the old one is freed later. */
		edu_raise(&self->e, 1);
		ASSERT_EQ(POLLIN, t_poll(self->fd, POLLIN, 2000) & POLLIN) TH_LOG("move %d", i);
		t_irq_read4(self->fd);
		edu_ack(&self->e, 1);
		t_msleep(1);
	}
	stop = 1;
	for (c = 0; c < 2; c++) {
		pthread_join(th[c], &n);
		TH_LOG("reader on CPU %d: %ld reads", c, (long)n);
		EXPECT_LT(100, (long)n);
	}
}

TEST_HARNESS_MAIN
