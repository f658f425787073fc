// SPDX-License-Identifier: MIT
/*
 * uli_reraise - a handler that acknowledges its device and raises it
 * again is called again at once, on INTx and on MSI, also when the CPU
 * it runs on is otherwise idle.  An MSI raised during its handler used to
 * wait for some later interrupt return on that CPU: a timer tick (~4 ms)
 * when busy, any interrupt at all when idle; 1,000 re-raises took seconds.
 *
 * And an MSI moved to another CPU while its handler runs is not handled
 * there at the same time: the other CPU used to run the same handler, on
 * the same stack, beside it (and teardown's wait for the running handler
 * could end while one still ran).
 */
#include <stdatomic.h>

#include "kselftest_harness.h"
#include "uli_util.h"

#define N_CHAIN	1000

static struct edu e;
static volatile uint64_t handled;
static volatile int left;

static void handler(void *arg)
{
	(void)arg;
	edu_ack(&e, edu_status(&e));
	handled++;
	if (left > 0) {
		left--;
		edu_raise(&e, 1);
	}
}

FIXTURE(rr) {
	void *uli;
};

FIXTURE_VARIANT(rr) {
	int flags;
};

FIXTURE_VARIANT_ADD(rr, intx) {
	.flags = ULI_INTX,
};

FIXTURE_VARIANT_ADD(rr, msi) {
	.flags = ULI_MSI,
};

FIXTURE_SETUP(rr)
{
	ASSERT_EQ(0, edu_open(&e, EDU_SLOT_C));
	edu_ack(&e, ~0u);
	handled = 0;
	left = 0;
	self->uli = ULI_register_pci(e.bdf, handler, NULL, 0, NULL, 0, variant->flags);
	if (!self->uli && errno == EOPNOTSUPP && getenv("ULI_MODE"))
		SKIP(return, "the proc method has no MSI");
	ASSERT_NE(NULL, self->uli) TH_LOG("ULI_register_pci: %s", strerror(errno));
}

FIXTURE_TEARDOWN(rr)
{
	if (self->uli)
		EXPECT_EQ(0, ULI_destroy(self->uli));
	edu_ack(&e, ~0u);
	edu_close(&e);
}

TEST_F_TIMEOUT(rr, chain_on_idle_cpu, 120)
{
	struct uli_stats st0, st;
	uint64_t t0, ms;
	int irq = uu_uli_irq(self->uli, &e);

	ASSERT_LE(0, irq);
	/* Away from the handler's CPU, and asleep: it has nothing else to do. */
	if (uu_ncpus() > 1)
		ASSERT_EQ(0, uu_pin((uu_irq_cpu(irq) + 1) % uu_ncpus()));
	ASSERT_EQ(0, ULI_get_stats(self->uli, &st0));

	left = N_CHAIN - 1;
	t0 = uu_now_ns();
	edu_raise(&e, 1);
	while (handled < N_CHAIN && uu_now_ns() - t0 < 10000000000ull)
		usleep(1000);
	ms = (uu_now_ns() - t0) / 1000000;
	ASSERT_EQ(0, ULI_get_stats(self->uli, &st));
	TH_LOG("%llu calls in %llu ms, %llu interrupts, %llu deferred",
	       (unsigned long long)handled, (unsigned long long)ms,
	       (unsigned long long)(st.interrupts - st0.interrupts),
	       (unsigned long long)(st.deferred - st0.deferred));
	ASSERT_EQ(N_CHAIN, handled);
	EXPECT_EQ(N_CHAIN, st.calls - st0.calls);
	EXPECT_EQ(N_CHAIN, st.interrupts - st0.interrupts);
	/*
	 * Measured under TCG, 2 vCPUs: tens of ms with the fix (the
	 * throttle gives a chain half of each ms); about 4 s without.
	 */
	EXPECT_GT(2000, ms);
	EXPECT_EQ(0, edu_status(&e));
}

static atomic_int inside, overlaps, calls;
static volatile int hold, entered;
static volatile int call_cpu[8];

static int this_cpu(void)
{
	unsigned int aux;

	__builtin_ia32_rdtscp(&aux);	/* TSC_AUX: the CPU number */
	return aux & 0xfff;
}

static void hold_handler(void *arg)
{
	uint64_t t0 = uu_rdtsc(), limit = (uint64_t)(uintptr_t)arg;
	int i;

	if (atomic_fetch_add(&inside, 1))
		atomic_fetch_add(&overlaps, 1);
	edu_ack(&e, edu_status(&e));
	/* The first call holds its CPU until told, within its budget. */
	i = atomic_fetch_add(&calls, 1);
	if (i < 8)
		call_cpu[i] = this_cpu();
	if (i == 0) {
		entered = 1;
		while (hold && uu_rdtsc() - t0 < limit)
			;
	}
	atomic_fetch_sub(&inside, 1);
}

/*
 * MSI only: an INTx device stays masked while its handler runs.  Move the
 * vector from CPU A to B and raise: that interrupt still lands on A (x86
 * moves an MSI at its next interrupt) and its handler holds A.  Two more
 * raises land on B meanwhile.  They must wait for A's call to end, and,
 * queued as one upcall, give one call on B.
 */
TEST(msi_moved_during_handler)
{
	uint64_t ms = uu_tsc_per_ms();
	struct uli_stats st;
	int irq, a, b, i;
	void *uli;

	if (uu_ncpus() < 2)
		SKIP(return, "needs 2 CPUs");
	ASSERT_EQ(0, edu_open(&e, EDU_SLOT_C));
	edu_ack(&e, ~0u);
	uli = ULI_register_pci(e.bdf, hold_handler, (void *)(uintptr_t)(200 * ms),
			       0, NULL, 0, ULI_MSI);
	if (!uli && errno == EOPNOTSUPP && getenv("ULI_MODE"))
		SKIP(return, "the proc method has no MSI");
	ASSERT_NE(NULL, uli) TH_LOG("ULI_register_pci: %s", strerror(errno));
	ASSERT_EQ(0, ULI_set_budget(uli, 1000000000ull));
	irq = uu_uli_irq(uli, &e);
	ASSERT_LE(0, irq);
	a = uu_irq_cpu(irq);
	b = (a + 1) % uu_ncpus();
	ASSERT_EQ(0, uu_pin(b));

	hold = 1;
	ASSERT_EQ(0, uu_set_irq_cpu(irq, b));
	edu_raise(&e, 1);
	for (i = 0; !entered && i < 2000; i++)
		usleep(1000);
	ASSERT_TRUE(entered);
	edu_raise(&e, 1);
	usleep(2000);
	edu_raise(&e, 1);
	usleep(20000);
	hold = 0;
	for (i = 0; atomic_load(&calls) < 3 && i < 2000; i++)
		usleep(1000);
	ASSERT_EQ(0, ULI_get_stats(uli, &st));
	TH_LOG("irq %d moved from CPU %d to %d (now %d): %d calls (CPUs %d %d %d), %d overlapping, %llu interrupts",
	       irq, a, b, uu_irq_cpu(irq), atomic_load(&calls), call_cpu[0], call_cpu[1],
	       call_cpu[2], atomic_load(&overlaps), (unsigned long long)st.interrupts);
	ASSERT_EQ(a, call_cpu[0]) TH_LOG("not arranged: the first call ran on CPU %d", call_cpu[0]);
	EXPECT_EQ(0, atomic_load(&overlaps));
	EXPECT_EQ(2, atomic_load(&calls));
	EXPECT_EQ(b, call_cpu[1]);
	EXPECT_EQ(3, st.interrupts);
	EXPECT_LE(1, st.deferred);
	EXPECT_EQ(0, edu_status(&e));
	EXPECT_EQ(0, st.aborted_fault + st.aborted_timeout);
	EXPECT_EQ(0, ULI_destroy(uli));
	edu_close(&e);
}

TEST_HARNESS_MAIN
