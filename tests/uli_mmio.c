// SPDX-License-Identifier: MIT
/*
 * uli_mmio - a device described by its status and acknowledge registers
 * (ULI_register_mmio(), Alan Cox's proposal of 2005): the kernel tells
 * from the status register whether the device interrupts, acknowledges
 * it, and hands the handler the acknowledged bits (ULI_status()).  No
 * INTx masking: the line and the device's DisINTx are never touched
 * while it runs, so two such devices, or one beside a PCI 2.3 INTx
 * registration, share a line.  In both methods.
 */
#include <pthread.h>
#include <sys/mman.h>

#include "kselftest_harness.h"
#include "helpers.h"

#define N_MMIO		t_test_n(20)
#define STACK_SIZE	(64 * 1024)

static struct edu ea, eb;
static void *ua, *ub;
static volatile uint64_t handled_a, handled_b;
static volatile uint32_t status_a, status_b, acked_bad;
static volatile int reraise;

/* Acknowledged already: the device reads 0, and the bits are ours. */
static void handler_a(void *arg)
{
	(void)arg;
	status_a |= ULI_status(ua);
	if (edu_status(&ea))
		acked_bad++;
	handled_a++;
	if (reraise > 0) {
		reraise--;
		edu_raise(&ea, 1);
	}
}

static void handler_b(void *arg)
{
	(void)arg;
	status_b |= ULI_status(ub);
	handled_b++;
}

/* edu@B's handler when it is registered with INTx masking: it acks. */
static void handler_b_intx(void *arg)
{
	(void)arg;
	status_b |= edu_status(&eb);
	edu_ack(&eb, edu_status(&eb));
	handled_b++;
}

FIXTURE(mm) {
	int dummy;
};

FIXTURE_SETUP(mm)
{
	int ret;

	ua = ub = NULL;
	handled_a = handled_b = 0;
	status_a = status_b = acked_bad = 0;
	reraise = 0;
	ret = edu_open_clean(&ea, EDU_SLOT_A);
	ASSERT_EQ(0, ret) TH_LOG("edu@%d: %s", EDU_SLOT_A, strerror(-ret));
	ret = edu_open_clean(&eb, EDU_SLOT_B);
	ASSERT_EQ(0, ret) TH_LOG("edu@%d: %s", EDU_SLOT_B, strerror(-ret));
	if (ea.irq != eb.irq)
		SKIP(return, "edu@%d (irq %d) and edu@%d (irq %d) do not share",
		     EDU_SLOT_A, ea.irq, EDU_SLOT_B, eb.irq);
	ASSERT_EQ(0, t_line_flush(&ea));
	ua = ULI_register_mmio(ea.bdf, &edu_uli_regs, handler_a, NULL, 0, NULL, 0);
	ASSERT_NE(NULL, ua) TH_LOG("ULI_register_mmio: %s", strerror(errno));
	EXPECT_EQ(ea.irq, ULI_irq(ua));
	ASSERT_EQ(0, ULI_set_budget(ua, T_LONG_BUDGET));
}

FIXTURE_TEARDOWN(mm)
{
	edu_quiet(&ea);
	edu_quiet(&eb);
	if (ua)
		EXPECT_EQ(0, ULI_destroy(ua));
	if (ub)
		EXPECT_EQ(0, ULI_destroy(ub));
	edu_close_clean(&ea);
	edu_close_clean(&eb);
}

/*
 * Each raise is one call, with the bits raised, acknowledged before the
 * handler runs; DisINTx is never set (no config-space masking) and the
 * line never disabled.
 */
TEST_F_TIMEOUT(mm, exact_calls_and_status, 600)
{
	uint64_t i, n = N_MMIO;
	struct uli_stats st;
	uint32_t bits = 0, want = 0;
	int bad_intx = 0;

	for (i = 0; i < n; i++) {
		bits = 1u << (i % 32);
		status_a = 0;
		edu_raise(&ea, bits);
		if (!t_wait_count(&handled_a, i + 1, 2000))
			break;
		if (status_a != bits)
			break;
		want |= bits;
		if (i % 1000 == 0 && edu_intx_enabled(&ea) != 1)
			bad_intx++;
	}
	EXPECT_EQ(n, i) TH_LOG("stopped at %llu: handled %llu, status 0x%x for 0x%x",
			       (unsigned long long)i, (unsigned long long)handled_a,
			       status_a, bits);
	EXPECT_EQ(0xffffffffu, want);
	EXPECT_EQ(0, acked_bad);
	EXPECT_EQ(0, bad_intx);
	EXPECT_EQ(0, edu_status(&ea));
	EXPECT_EQ(0, t_irq_ddepth(ea.irq));
	ASSERT_EQ(0, ULI_get_stats(ua, &st));
	EXPECT_EQ(n, st.calls);
	if (t_upcall_mode())
		EXPECT_EQ(n, st.interrupts);
}

/* Raise both devices at once, @n times: how many rounds both handled. */
static uint64_t raise_both(uint64_t n, uint32_t bits_a, uint32_t bits_b)
{
	uint64_t i;

	for (i = 0; i < n; i++) {
		edu_raise(&ea, bits_a);
		edu_raise(&eb, bits_b);
		if (!t_wait_count(&handled_a, i + 1, 2000) ||
		    !t_wait_count(&handled_b, i + 1, 2000))
			break;
	}
	return i;
}

/* Both devices described, both raised at once: each gets its own. */
TEST_F_TIMEOUT(mm, two_described_devices_share, 600)
{
	uint64_t i, n = N_MMIO;
	struct uli_stats sa, sb;

	if (!t_upcall_mode())
		SKIP(return, "the /proc method takes one file per line");

	ub = ULI_register_mmio(eb.bdf, &edu_uli_regs, handler_b, NULL, 0, NULL, 0);
	ASSERT_NE(NULL, ub) TH_LOG("ULI_register_mmio: %s", strerror(errno));
	i = raise_both(n, 0x10, 0x20);
	EXPECT_EQ(n, i) TH_LOG("stopped at %llu: a %llu, b %llu", (unsigned long long)i,
			       (unsigned long long)handled_a, (unsigned long long)handled_b);
	EXPECT_EQ(0x10, status_a);
	EXPECT_EQ(0x20, status_b);
	EXPECT_EQ(0, acked_bad);
	EXPECT_EQ(0, t_irq_ddepth(ea.irq));
	ASSERT_EQ(0, ULI_get_stats(ua, &sa));
	ASSERT_EQ(0, ULI_get_stats(ub, &sb));
	EXPECT_EQ(n, sa.calls);
	EXPECT_EQ(n, sb.calls);
	/* One hard handler run may serve both, never count the other's. */
	if (t_upcall_mode()) {
		EXPECT_EQ(n, sa.interrupts);
		EXPECT_EQ(n, sb.interrupts);
	}
}

/* Beside a registration that masks its device with DisINTx. */
TEST_F_TIMEOUT(mm, beside_intx_masking, 600)
{
	uint64_t i, n = N_MMIO;

	if (!t_upcall_mode())
		SKIP(return, "the /proc method takes one file per line");

	ub = ULI_register_pci(eb.bdf, handler_b_intx, NULL, 0, NULL, 0, ULI_INTX);
	ASSERT_NE(NULL, ub) TH_LOG("ULI_register_pci: %s", strerror(errno));
	i = raise_both(n, 1, 2);
	EXPECT_EQ(n, i) TH_LOG("stopped at %llu: a %llu, b %llu", (unsigned long long)i,
			       (unsigned long long)handled_a, (unsigned long long)handled_b);
	EXPECT_EQ(1, status_a);
	EXPECT_EQ(2, status_b);
	EXPECT_EQ(0, t_irq_ddepth(ea.irq));
}

/*
 * Blocked, the device is still acknowledged at each interrupt (nothing
 * holds the shared line), and what came in is one call at the unblock,
 * with every bit.
 */
TEST_F_TIMEOUT(mm, blocked_acknowledges_and_collapses, 120)
{
	uint32_t bits;

	ULI_block_intr(ua);
	for (bits = 1; bits <= 4; bits <<= 1) {
		edu_raise(&ea, bits);
		EXPECT_TRUE(edu_wait_clear(&ea, 2000)) TH_LOG("raise 0x%x not acknowledged", bits);
		usleep(20000);
	}
	EXPECT_EQ(0, handled_a);
	EXPECT_EQ(1, edu_intx_enabled(&ea));
	EXPECT_EQ(0, t_irq_ddepth(ea.irq));
	ULI_unblock_intr(ua);
	EXPECT_TRUE(t_wait_count(&handled_a, 1, 2000));
	usleep(50000);
	EXPECT_EQ(1, handled_a);
	EXPECT_EQ(7, status_a);
}

/*
 * A handler that raises its device again is called again; the chain is
 * one interrupt per call, and the kernel's acknowledgement never loses
 * one.
 */
TEST_F_TIMEOUT(mm, reraise_chain, 120)
{
	struct uli_stats st0, st;

	ASSERT_EQ(0, ULI_get_stats(ua, &st0));
	reraise = 999;
	edu_raise(&ea, 1);
	ASSERT_TRUE(t_wait_count(&handled_a, 1000, 20000)) TH_LOG("%llu calls",
								(unsigned long long)handled_a);
	usleep(20000);
	ASSERT_EQ(0, ULI_get_stats(ua, &st));
	EXPECT_EQ(1000, handled_a);
	EXPECT_EQ(1000, st.calls - st0.calls);
	if (t_upcall_mode())
		EXPECT_EQ(1000, st.interrupts - st0.interrupts);
	EXPECT_EQ(0, edu_status(&ea));
}

/*
 * Owners that end in the middle of a storm of their device's interrupts:
 * each release leaves the device's INTx off (nobody serves it any more),
 * and the next owner is served at once, its line enabled.
 */
static void storm_handler(void *arg)
{
	(void)arg;
	handled_a++;
	edu_raise(&ea, 1);
}

TEST_F_TIMEOUT(mm, owners_end_in_a_storm, 900)
{
	int i, n = (int)t_test_n(1000), status;

	if (!t_upcall_mode())
		SKIP(return, "a property of the upcall");
	ASSERT_EQ(0, ULI_destroy(ua));
	ua = NULL;
	for (i = 0; i < n; i++) {
		pid_t pid = fork();

		if (pid == 0) {
			void *u = ULI_register_mmio(ea.bdf, &edu_uli_regs, storm_handler,
						    NULL, 0, NULL, 0);

			if (!u || ULI_set_budget(u, T_LONG_BUDGET))
				_exit(1);
			handled_a = 0;
			edu_raise(&ea, 1);
			if (!t_wait_count(&handled_a, 20, 5000))
				_exit(2);
			if (i % 2)
				_exit(0);	/* the storm still on */
			ULI_destroy(u);
			_exit(edu_intx_enabled(&ea) == 0 ? 0 : 3);
		}
		ASSERT_LT(0, pid);
		ASSERT_EQ(pid, waitpid(pid, &status, 0));
		ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
			TH_LOG("owner %d: status 0x%x", i, status);
		ASSERT_EQ(0, edu_intx_enabled(&ea)) TH_LOG("owner %d", i);
		edu_ack(&ea, ~0u);
	}
	ua = ULI_register_mmio(ea.bdf, &edu_uli_regs, handler_a, NULL, 0, NULL, 0);
	ASSERT_NE(NULL, ua) TH_LOG("ULI_register_mmio: %s", strerror(errno));
	edu_raise(&ea, 4);
	EXPECT_TRUE(t_wait_count(&handled_a, 1, 2000));
	EXPECT_EQ(4, status_a);
	EXPECT_EQ(0, t_irq_ddepth(ea.irq));
}

TEST_HARNESS_MAIN
