// SPDX-License-Identifier: MIT
/*
 * uli_idle_poll - a handler that borrows an idle CPU does not hold up the
 * IPIs sent to that CPU.
 *
 * A CPU whose idle task polls for need_resched (idle=poll, or a cpuidle
 * polling state) is sent no IPI: the sender sets the flag and trusts the
 * poll loop, which does not run while a handler borrows the CPU.  Here a
 * handler spins for SPIN_MS on idle CPU 1 while the owner, on CPU 0,
 * write-protects a page of its own memory: mprotect() flushes the TLB of
 * every CPU that runs the owner's mm, CPU 1 among them, and waits for
 * it.  It must return while the handler still runs, not at its end.
 * make test boots once with idle=poll for it (ULI_IDLE_POLL=1 checks
 * that the boot has it); elsewhere the same must hold, without polling.
 * And membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) by the owner, a
 * single-threaded process, reaches the CPU that runs its handler: a
 * function-call IPI arrives there (/proc/interrupts, CAL) and the call
 * returns while the handler still runs.  Both PCI sources, INTx and MSI.
 */
#include <linux/membarrier.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "kselftest_harness.h"
#include "helpers.h"

#define ROUNDS		30
/* Long against the host's scheduling of the vCPUs, which TCG is subject to. */
#define SPIN_MS		20

static struct edu e;
static volatile uint64_t handled;
static volatile int in_handler;
static uint64_t spin_cycles;

static void handler(void *arg)
{
	uint64_t t0 = t_rdtsc();

	(void)arg;
	in_handler = 1;
	edu_ack(&e, edu_status(&e));
	while (t_rdtsc() - t0 < spin_cycles)
		;
	in_handler = 0;
	handled++;
}

static bool cmdline_has(const char *word)
{
	char buf[1024];

	if (t_read_file("/proc/cmdline", buf, sizeof(buf)) <= 0)
		return false;
	return strstr(buf, word) != NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

FIXTURE(ip) {
	void *uli;
	char *page;
};

FIXTURE_VARIANT(ip) {
	int how;
};

FIXTURE_VARIANT_ADD(ip, intx) { .how = ULI_INTX };
FIXTURE_VARIANT_ADD(ip, msi) { .how = ULI_MSI };

FIXTURE_SETUP(ip)
{
	if (!t_upcall_mode())
		SKIP(return, "a handler thread borrows no CPU: upcall only");
	if (t_ncpus() < 2)
		SKIP(return, "needs an idle CPU for the handler");
	if (getenv("ULI_IDLE_POLL"))
		ASSERT_TRUE(cmdline_has("idle=poll")) TH_LOG("ULI_IDLE_POLL=1 without idle=poll");
	spin_cycles = SPIN_MS * t_tsc_per_ms();
	self->page = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	ASSERT_NE(MAP_FAILED, self->page);
	ASSERT_EQ(0, edu_open_clean(&e, EDU_SLOT_C));
	handled = 0;
	self->uli = t_register(&e, handler, NULL, 0, NULL, 0, variant->how);
	ASSERT_NE(NULL, self->uli) TH_LOG("register: %s", strerror(errno));
	ASSERT_EQ(0, ULI_set_budget(self->uli, T_LONG_BUDGET));
	ASSERT_EQ(0, t_set_irq_cpu(t_uli_irq(self->uli, &e), 1));
	ASSERT_EQ(0, t_pin(0));
	/* An IO-APIC line moves at its next interrupt: take that one now. */
	ASSERT_EQ(1, t_raise_each(&e, &handled, 1, 2000));
}

FIXTURE_TEARDOWN(ip)
{
	if (self->uli)
		ULI_destroy(self->uli);
	edu_close_clean(&e);
	if (self->page && self->page != MAP_FAILED)
		munmap(self->page, 4096);
}

TEST_F_TIMEOUT(ip, flush_during_handler, 120)
{
	uint64_t dt[ROUNDS], t0, want;
	struct uli_stats st0, st;
	int i, during = 0, n = 0;
	bool seen;

	ASSERT_EQ(0, ULI_get_stats(self->uli, &st0));
	for (i = 0; i < ROUNDS; i++) {
		want = handled + 1;
		self->page[0] = (char)i;	/* a writable TLB entry on CPU 0 */
		edu_raise(&e, 1);
		t0 = t_now_ns();
		while (!in_handler && handled < want && t_ms_since(t0) < 2000)
			;
		seen = in_handler;
		ASSERT_TRUE(seen || handled >= want) TH_LOG("round %d: no handler", i);
		t0 = t_now_ns();
		ASSERT_EQ(0, mprotect(self->page, 4096, PROT_READ));
		/* Judged only where the call started during the handler. */
		if (seen) {
			dt[n++] = t_now_ns() - t0;
			during += in_handler;
		}
		ASSERT_EQ(0, mprotect(self->page, 4096, PROT_READ | PROT_WRITE));
		ASSERT_TRUE(t_wait_count(&handled, want, 2000)) TH_LOG("round %d: handler did not end", i);
	}
	ASSERT_EQ(0, ULI_get_stats(self->uli, &st));
	/* The case under test: mprotect() called while the handler ran. */
	ASSERT_LE(ROUNDS / 2, n) TH_LOG("only %d of %d handlers seen running", n, ROUNDS);
	qsort(dt, n, sizeof(dt[0]), cmp_u64);
	TH_LOG("%s: %d rounds judged, mprotect() returned during the %d ms handler in %d; "
	       "p50 %llu us, max %llu us; upcalls on idle %llu of %llu",
	       cmdline_has("idle=poll") ? "idle=poll" : "no idle=poll", n, SPIN_MS, during,
	       (unsigned long long)dt[n / 2] / 1000, (unsigned long long)dt[n - 1] / 1000,
	       (unsigned long long)(st.ctx_idle - st0.ctx_idle),
	       (unsigned long long)(st.calls - st0.calls));
	/* The case under test: the handler borrowed the idle CPU. */
	EXPECT_LE(ROUNDS * 9 / 10, (int)(st.ctx_idle - st0.ctx_idle));
	EXPECT_LE(n * 8 / 10, during);
	EXPECT_GT(SPIN_MS * 1000000ULL / 4, dt[n / 2]);
}

static int membarrier(int cmd)
{
	return syscall(__NR_membarrier, cmd, 0, 0);
}

TEST_F_TIMEOUT(ip, membarrier_reaches_handler, 120)
{
	int i, n = 0, during = 0, ipis = 0;
	long long cal0, cal1;
	uint64_t t0, want;

	ASSERT_EQ(0, membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED))
		TH_LOG("membarrier register: %s", strerror(errno));
	for (i = 0; i < ROUNDS; i++) {
		want = handled + 1;
		edu_raise(&e, 1);
		t0 = t_now_ns();
		while (!in_handler && handled < want && t_ms_since(t0) < 2000)
			;
		ASSERT_TRUE(in_handler || handled >= want) TH_LOG("round %d: no handler", i);
		if (in_handler) {
			cal0 = t_arch_irq_count("CAL", 1);
			ASSERT_EQ(0, membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED));
			during += in_handler;
			cal1 = t_arch_irq_count("CAL", 1);
			ipis += cal1 > cal0;
			n++;
		}
		ASSERT_TRUE(t_wait_count(&handled, want, 2000)) TH_LOG("round %d: handler did not end", i);
	}
	TH_LOG("%d rounds judged: membarrier() sent CPU 1 a function-call IPI in %d, "
	       "returned during the %d ms handler in %d", n, ipis, SPIN_MS, during);
	ASSERT_LE(ROUNDS / 2, n) TH_LOG("only %d of %d handlers seen running", n, ROUNDS);
	EXPECT_LE(n * 8 / 10, ipis);
	EXPECT_LE(n * 8 / 10, during);
}

TEST_HARNESS_MAIN
