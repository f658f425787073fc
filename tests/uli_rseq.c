// SPDX-License-Identifier: MIT
/*
 * uli_rseq - a handler takes the CPU from the task it interrupts as a
 * preemption does, so that task's rseq critical section restarts.
 *
 * An owner thread on the CPU that takes edu@5's interrupts waits, inside
 * an rseq critical section, for the handler's count to move; another
 * thread raises the interrupt meanwhile.  The handler runs in between two
 * instructions of the section, so the section must be aborted, never
 * committed: a commit is a per-CPU update that a handler's own update
 * would have been lost against.  The handler notes its CPU (RDTSCP's
 * TSC_AUX, which Linux sets to the CPU number).  glibc registers every thread's rseq
 * area; the section's descriptor and abort signature are the kernel's
 * ABI (RSEQ_SIG on x86).  Both PCI sources, INTx and MSI.
 */
#include <pthread.h>
#include <sys/rseq.h>

#include "kselftest_harness.h"
#include "helpers.h"

#define ROUNDS		200
#define SPINS		(1UL << 28)	/* a bound on a section's wait */

static struct edu e;
static volatile uint64_t handled;
static volatile uint64_t handler_tsc;
static volatile unsigned int handler_cpu;

/* The TSC and, from TSC_AUX as Linux sets it, the CPU: no system call. */
static void handler(void *arg)
{
	uint32_t lo, hi, aux;

	(void)arg;
	edu_ack(&e, edu_status(&e));
	__asm__ volatile ("rdtscp" : "=a" (lo), "=d" (hi), "=c" (aux));
	handler_tsc = (uint64_t)hi << 32 | lo;
	handler_cpu = aux & 0xfff;
	handled++;
}

static struct rseq *rseq_area(void)
{
	char *tp;

	__asm__ ("mov %%fs:0, %0" : "=r" (tp));
	return (struct rseq *)(tp + __rseq_offset);
}

/*
 * One critical section: note the time on entering it, then wait for
 * *cnt to leave @old.  1 if it was aborted, 0 if it ran to its end.
 */
static int section(volatile uint64_t *cnt, uint64_t old, uint64_t *t_in)
{
	struct rseq *rs = rseq_area();
	unsigned long spins = SPINS;

	__asm__ goto (
		".pushsection __rseq_cs, \"aw\"\n\t"
		".balign 32\n\t"
		"9:\n\t"
		".long 0, 0\n\t"			/* version, flags */
		".quad 1f, 2f - 1f, 4f\n\t"		/* start, length, abort */
		".popsection\n\t"
		"leaq 9b(%%rip), %%rax\n\t"
		"movq %%rax, %[cs]\n\t"
		"1:\n\t"
		"rdtsc\n\t"
		"shlq $32, %%rdx\n\t"
		"orq %%rdx, %%rax\n\t"
		"movq %%rax, %[t_in]\n\t"
		"3:\n\t"
		"cmpq %[old], %[cnt]\n\t"
		"jne 2f\n\t"
		"decq %[spins]\n\t"
		"jnz 3b\n\t"
		"2:\n\t"
		".pushsection __rseq_failure, \"ax\"\n\t"
		".byte 0x0f, 0xb9, 0x3d\n\t"		/* ud1, then RSEQ_SIG */
		".long 0x53053053\n\t"
		"4:\n\t"
		"jmp %l[aborted]\n\t"
		".popsection\n\t"
		: : [cs] "m" (rs->rseq_cs), [cnt] "m" (*cnt), [old] "r" (old),
		    [t_in] "m" (*t_in), [spins] "r" (spins)
		: "rax", "rdx", "memory", "cc" : aborted);
	__asm__ volatile ("movq $0, %0" : "=m" (rs->rseq_cs) : : "memory");
	return 0;
aborted:
	return 1;
}

struct outcome {
	int cpu;
	volatile int round;		/* the section of this round is entered soon */
	volatile int done;
	int aborted_by_handler;		/* aborted, and the count had moved */
	int committed_over_handler;	/* ran to its end past a handler: the bug */
	int other;			/* aborted before the handler, or no raise */
};

static void *sectioner(void *arg)
{
	struct outcome *o = arg;
	uint64_t old, t_in;
	int i, r;

	if (t_pin(o->cpu))
		return NULL;
	for (i = 1; i <= ROUNDS; i++) {
		old = handled;
		t_in = UINT64_MAX;
		o->round = i;
		r = section(&handled, old, &t_in);
		if (r && handled != old)
			o->aborted_by_handler++;
		else if (!r && handled != old && handler_tsc > t_in &&
			 handler_cpu == (unsigned int)o->cpu)
			o->committed_over_handler++;
		else
			o->other++;
		/* The raiser waits for the count before the next round. */
		while (handled == old && !o->done)
			;
	}
	o->round = -1;
	return NULL;
}

FIXTURE(rs) {
	void *uli;
};

FIXTURE_VARIANT(rs) {
	int how;
};

FIXTURE_VARIANT_ADD(rs, intx) { .how = ULI_INTX };
FIXTURE_VARIANT_ADD(rs, msi) { .how = ULI_MSI };

FIXTURE_SETUP(rs)
{
	if (!t_upcall_mode())
		SKIP(return, "a handler thread is no preemption: upcall only");
	if (t_ncpus() < 2)
		SKIP(return, "needs a CPU for the section and one for the raiser");
	ASSERT_NE(0u, __rseq_size) TH_LOG("glibc registered no rseq area");
	ASSERT_EQ(0, edu_open_clean(&e, EDU_SLOT_C));
	handled = 0;
	handler_tsc = 0;
	self->uli = t_register(&e, handler, NULL, 0, NULL, 0, variant->how);
	ASSERT_NE(NULL, self->uli) TH_LOG("register: %s", strerror(errno));
	ASSERT_EQ(0, t_set_irq_cpu(t_uli_irq(self->uli, &e), 1));
	/* An IO-APIC line moves at its next interrupt: take that one now. */
	ASSERT_EQ(1, t_raise_each(&e, &handled, 1, 2000));
	handled = 0;
}

FIXTURE_TEARDOWN(rs)
{
	if (self->uli)
		ULI_destroy(self->uli);
	edu_close_clean(&e);
}

TEST_F_TIMEOUT(rs, section_restarts, 300)
{
	struct outcome o = { .cpu = 1 };
	struct uli_stats st;
	pthread_t thr;
	uint64_t want;
	int i;

	ASSERT_EQ(0, t_pin(0));
	ASSERT_EQ(0, pthread_create(&thr, NULL, sectioner, &o));
	for (i = 1; i <= ROUNDS; i++) {
		want = handled + 1;
		while (o.round < i && o.round >= 0)
			;
		ASSERT_LE(0, o.round) TH_LOG("the section thread ended early");
		t_msleep(1);	/* inside the section by now, as a rule */
		edu_raise(&e, 1);
		if (!t_wait_count(&handled, want, 2000)) {
			o.done = 1;
			break;
		}
	}
	o.done = 1;
	pthread_join(thr, NULL);
	ASSERT_EQ(0, ULI_get_stats(self->uli, &st));
	TH_LOG("%d rounds: %d aborted by the handler, %d committed past it, %d other; "
	       "upcalls owner %llu other %llu idle %llu kernel %llu",
	       ROUNDS, o.aborted_by_handler, o.committed_over_handler, o.other,
	       (unsigned long long)st.ctx_owner, (unsigned long long)st.ctx_other,
	       (unsigned long long)st.ctx_idle, (unsigned long long)st.ctx_kernel);
	EXPECT_EQ((uint64_t)ROUNDS, handled);
	EXPECT_EQ(0, o.committed_over_handler);
	/* The case under test happened, in most rounds. */
	EXPECT_LE(ROUNDS / 2, o.aborted_by_handler);
}

TEST_HARNESS_MAIN
