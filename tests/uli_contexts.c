// SPDX-License-Identifier: MIT
/*
 * uli_contexts - the upcall is entered whatever the interrupted CPU runs:
 * the owner in user mode, another process in user mode, the idle task,
 * kernel code.  For each, N_RAISES raises give exactly as many
 * handler calls and acknowledged interrupts, and the kernel's counters
 * say the interrupted context was the one arranged.
 */
#include <fcntl.h>
#include <pthread.h>

#include "kselftest_harness.h"
#include "helpers.h"

/* ULI_TEST_N overrides, for quick runs by hand. */
#define N_RAISES t_test_n(1)

static struct edu e;
static volatile uint64_t handled;

static void handler(void *arg)
{
	(void)arg;
	edu_ack(&e, edu_status(&e));
	handled++;
}

static void spin_user(void)
{
	for (;;)
		__asm__ volatile ("" ::: "memory");
}

static void spin_kernel(void)
{
	static char buf[1 << 20];
	int fd = open("/dev/zero", O_RDONLY);

	for (;;)
		if (read(fd, buf, sizeof(buf)) < 0)
			_exit(1);
}

static volatile int owner_stop;

static void *owner_spin(void *arg)
{
	t_pin((int)(long)arg);
	while (!owner_stop)
		__asm__ volatile ("" ::: "memory");
	return NULL;
}

enum { OWNER, OTHER, IDLE, KERNEL };

/* The interrupts column of our line in /sys/kernel/debug/uli, or -1. */
static long long debugfs_interrupts(pid_t pid)
{
	FILE *f = fopen("/sys/kernel/debug/uli", "r");
	long long n = -1, v;
	char line[512], src[16];
	int p, irq;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%d %15s %d %lld", &p, src, &irq, &v) == 4 && p == pid)
			n = v;
	fclose(f);
	return n;
}

static void run(struct __test_metadata *_metadata, int ctx)
{
	struct uli_stats st;
	pthread_t thr;
	pid_t child = 0;
	uint64_t i, want, t0;
	int target, mine;
	bool upcall;
	void *uli;

	ASSERT_EQ(0, edu_open(&e, EDU_SLOT_C));
	handled = 0;
	uli = ULI_register_pci(e.bdf, handler, NULL, 0, NULL, 0, ULI_INTX);
	ASSERT_NE(NULL, uli) TH_LOG("ULI_register_pci: %s", strerror(errno));
	upcall = !strcmp(ULI_mode(uli), "upcall");
	ASSERT_EQ(0, ULI_set_budget(uli, T_LONG_BUDGET));

	target = t_irq_cpu(e.irq);
	if (t_ncpus() < 2 && ctx != OWNER)
		SKIP(return, "needs 2 CPUs: the raiser would be the interrupted one");
	mine = t_ncpus() < 2 ? target : (target + 1) % t_ncpus();
	ASSERT_EQ(0, t_pin(mine));

	switch (ctx) {
	case OWNER:
		owner_stop = 0;
		if (mine != target)
			ASSERT_EQ(0, pthread_create(&thr, NULL, owner_spin, (void *)(long)target));
		break;
	case OTHER:
		child = t_spawn(target, spin_user);
		break;
	case KERNEL:
		child = t_spawn(target, spin_kernel);
		break;
	}
	/*
	 * fork() made our pages copy-on-write: a handler writing one from
	 * another context would fault.  Write what it writes, now.
	 */
	handled = 0;
	usleep(100000);	/* let the spinner take the CPU */

	t0 = t_now_ns();
	for (i = 0; i < N_RAISES; i++) {
		edu_raise(&e, 1);
		if (!t_wait_count(&handled, i + 1, 2000))
			break;
	}
	owner_stop = 1;
	if (ctx == OWNER && mine != target)
		pthread_join(thr, NULL);
	t_stop(child);

	ASSERT_EQ(0, ULI_get_stats(uli, &st));
	TH_LOG("%llu ms: calls %llu interrupts %llu owner %llu other %llu idle %llu kernel %llu deferred %llu",
	       (unsigned long long)(t_now_ns() - t0) / 1000000, (unsigned long long)st.calls, (unsigned long long)st.interrupts,
	       (unsigned long long)st.ctx_owner, (unsigned long long)st.ctx_other,
	       (unsigned long long)st.ctx_idle, (unsigned long long)st.ctx_kernel,
	       (unsigned long long)st.deferred);
	EXPECT_EQ(N_RAISES, handled);
	EXPECT_EQ(N_RAISES, st.calls);
	EXPECT_EQ(N_RAISES, st.interrupts);
	EXPECT_EQ(0, edu_status(&e));
	EXPECT_EQ(0, st.aborted_fault + st.aborted_syscall + st.aborted_timeout);
	if (!upcall) {	/* ULI_MODE=proc: a thread, no interrupted context */
		EXPECT_EQ(0, ULI_destroy(uli));
		edu_close(&e);
		return;
	}

	/* The same counters in debugfs, on our line. */
	EXPECT_EQ(st.interrupts, debugfs_interrupts(getpid()));

	/*
	 * The arranged context must dominate.  Measured under TCG, 2 vCPUs:
	 * 8-17% of the interrupts land while the spinner is in the kernel
	 * (ticks, page-table work after fork), so two thirds is the bar.
	 */
	want = N_RAISES * 2 / 3;
	switch (ctx) {
	case OWNER:
		EXPECT_GE(st.ctx_owner, want);
		break;
	case OTHER:
		EXPECT_GE(st.ctx_other, want);
		break;
	case IDLE:
		EXPECT_GE(st.ctx_idle, want);
		break;
	case KERNEL:
		/* read(/dev/zero) spends most of its time in the kernel. */
		EXPECT_GE(st.ctx_kernel, N_RAISES / 2);
		break;
	}
	EXPECT_EQ(0, ULI_destroy(uli));
	edu_close(&e);
}

/*
 * A call is counted as it starts, in both methods: a reader that sees
 * what the handler did sees it counted.  (The proc method used to count
 * after the return, and a test that read its stats at once saw one short.)
 */
static volatile int entered, left;
static uint64_t spin_cycles;

static void slow_handler(void *arg)
{
	uint64_t t0 = t_rdtsc();

	(void)arg;
	edu_ack(&e, edu_status(&e));
	entered = 1;
	while (t_rdtsc() - t0 < spin_cycles)	/* no clock_gettime(): no vDSO fallback syscall */
		;
	left = 1;
}

TEST(calls_counted_on_entry)
{
	struct uli_stats st;
	void *uli;

	spin_cycles = t_tsc_per_ms() * 3;
	ASSERT_EQ(0, edu_open(&e, EDU_SLOT_C));
	uli = ULI_register_pci(e.bdf, slow_handler, NULL, 0, NULL, 0, ULI_INTX);
	ASSERT_NE(NULL, uli) TH_LOG("ULI_register_pci: %s", strerror(errno));
	/* A 3 ms handler and a host stall could add up to the default. */
	ASSERT_EQ(0, ULI_set_budget(uli, T_LONG_BUDGET));
	if (t_ncpus() > 1)
		ASSERT_EQ(0, t_pin((t_irq_cpu(e.irq) + 1) % t_ncpus()));

	entered = left = 0;
	edu_raise(&e, 1);
	while (!entered)
		;
	ASSERT_EQ(0, ULI_get_stats(uli, &st));
	EXPECT_EQ(1, st.calls) TH_LOG("the handler is running (left %d)", left);
	while (!left)
		;
	EXPECT_EQ(0, ULI_destroy(uli));
	edu_close(&e);
}

FIXTURE(uli) {};
FIXTURE_SETUP(uli) {}
FIXTURE_TEARDOWN(uli) {}

TEST_F_TIMEOUT(uli, owner, 600) { run(_metadata, OWNER); }
TEST_F_TIMEOUT(uli, other_process, 600) { run(_metadata, OTHER); }
TEST_F_TIMEOUT(uli, idle, 600) { run(_metadata, IDLE); }
TEST_F_TIMEOUT(uli, kernel, 600) { run(_metadata, KERNEL); }

TEST_HARNESS_MAIN
