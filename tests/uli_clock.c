// SPDX-License-Identifier: MIT
/*
 * uli_clock - a handler reads the time and its CPU as any code does:
 *
 *  - in_handler: clock_gettime() of the clocks the vDSO serves,
 *    gettimeofday(), time() and sched_getcpu() in a handler on CPU 1
 *    give values between the owner's readings before and after, and
 *    the CPU that RDTSCP's TSC_AUX names (CPU 1 in most rounds: an
 *    IO-APIC line moves when it can); a CPU-time clock,
 *    which would be the interrupted task's, is EINVAL, not an abort;
 *  - on_hpet: the same with the HPET as the clocksource, which the vDSO
 *    cannot read: it falls back to the system call, which the kernel
 *    serves a handler;
 *  - fresh_process: in a program that never read the clock, whose vDSO
 *    pages are not mapped yet (the kernel maps them at their first use,
 *    and /proc/self/pagemap does not show such pages), the handler's
 *    first clock_gettime() works: the registration mapped them.
 * No handler is aborted.  INTx on edu@5.
 */
#include <sched.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>

#include "kselftest_harness.h"
#include "helpers.h"

#define ROUNDS		20
#define CS_PATH		"/sys/devices/system/clocksource/clocksource0/"

static struct edu e;
static volatile uint64_t handled;

/* What the handler read, each call. */
static struct timespec h_mono, h_real, h_boot, h_coarse, h_cpu;
static struct timeval h_tv;
static volatile time_t h_time;
static volatile int h_getcpu, h_auxcpu, h_cpu_ret, h_cpu_errno;
static volatile int h_ret;

static int aux_cpu(void)
{
	uint32_t lo, hi, aux;

	__asm__ volatile ("rdtscp" : "=a" (lo), "=d" (hi), "=c" (aux));
	return aux & 0xfff;
}

static void handler(void *arg)
{
	(void)arg;
	edu_ack(&e, edu_status(&e));
	h_ret = clock_gettime(CLOCK_MONOTONIC, &h_mono) |
		clock_gettime(CLOCK_REALTIME, &h_real) |
		clock_gettime(CLOCK_BOOTTIME, &h_boot) |
		clock_gettime(CLOCK_MONOTONIC_COARSE, &h_coarse) |
		gettimeofday(&h_tv, NULL);
	h_time = time(NULL);
	h_cpu_ret = clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &h_cpu);
	h_cpu_errno = errno;
	h_getcpu = sched_getcpu();
	h_auxcpu = aux_cpu();
	handled++;
}

static uint64_t ns(const struct timespec *t)
{
	return (uint64_t)t->tv_sec * 1000000000u + t->tv_nsec;
}

static int64_t tv_us(const struct timeval *t)
{
	return (int64_t)t->tv_sec * 1000000 + t->tv_usec;
}

static void *reg(void)
{
	void *uli = ULI_register_pci(e.bdf, handler, NULL, 0, NULL, 0, ULI_INTX);

	if (uli && t_set_irq_cpu(ULI_irq(uli), 1)) {
		ULI_destroy(uli);
		return NULL;
	}
	/* An IO-APIC line moves at its next interrupt: take that one now. */
	if (uli && t_raise_each(&e, &handled, 1, 2000) != 1) {
		ULI_destroy(uli);
		return NULL;
	}
	return uli;
}

/* Each check once per round; how many rounds failed it. */
struct tally {
	int raised, mono, real, boot, coarse, tv, time, cputime, getcpu;
	int on_cpu1;		/* not a failure: rounds on the line's CPU */
};

static void rounds(struct tally *t)
{
	struct timespec m0, m1, r0, r1, b0, b1, rc0;
	uint64_t want;
	int i;

	memset(t, 0, sizeof(*t));
	for (i = 0; i < ROUNDS; i++) {
		want = handled + 1;
		clock_gettime(CLOCK_MONOTONIC, &m0);
		clock_gettime(CLOCK_REALTIME, &r0);
		clock_gettime(CLOCK_REALTIME_COARSE, &rc0);
		clock_gettime(CLOCK_BOOTTIME, &b0);
		edu_raise(&e, 1);
		if (!t_wait_count(&handled, want, 2000)) {
			t->raised++;
			continue;
		}
		clock_gettime(CLOCK_MONOTONIC, &m1);
		clock_gettime(CLOCK_REALTIME, &r1);
		clock_gettime(CLOCK_BOOTTIME, &b1);
		t->mono += h_ret || ns(&h_mono) < ns(&m0) || ns(&h_mono) > ns(&m1);
		/* Realtime may be stepped; not here, where nothing sets it. */
		t->real += ns(&h_real) < ns(&r0) || ns(&h_real) > ns(&r1);
		t->boot += ns(&h_boot) < ns(&b0) || ns(&h_boot) > ns(&b1);
		/* The coarse clock lags by up to a tick. */
		t->coarse += ns(&h_coarse) > ns(&m1) ||
			     (int64_t)(ns(&m0) - ns(&h_coarse)) > 100000000;
		t->tv += tv_us(&h_tv) < (int64_t)(ns(&r0) / 1000) ||
			 tv_us(&h_tv) > (int64_t)(ns(&r1) / 1000);
		/* time() is the coarse clock's second: up to a tick behind. */
		t->time += h_time < rc0.tv_sec || h_time > r1.tv_sec;
		t->cputime += h_cpu_ret != -1 || h_cpu_errno != EINVAL;
		/* The CPU it ran on, which is, as a rule, the line's. */
		t->getcpu += h_getcpu != h_auxcpu;
		t->on_cpu1 += h_auxcpu == 1;
	}
}

static void report(struct __test_metadata *_metadata, const struct tally *t,
		   const struct uli_stats *st, const char *what)
{
	TH_LOG("%s: of %d rounds, failed: raise %d, MONOTONIC %d, REALTIME %d, BOOTTIME %d, "
	       "MONOTONIC_COARSE %d, gettimeofday %d, time %d, CPU-time EINVAL %d, "
	       "sched_getcpu %d (last %d, TSC_AUX %d; %d rounds on CPU 1)", what, ROUNDS,
	       t->raised, t->mono, t->real, t->boot, t->coarse, t->tv, t->time, t->cputime,
	       t->getcpu, h_getcpu, h_auxcpu, t->on_cpu1);
	EXPECT_EQ(0, t->raised + t->mono + t->real + t->boot + t->coarse + t->tv +
		  t->time + t->cputime + t->getcpu);
	/* Not CPU 0 throughout, which a sched_getcpu() stuck at 0 would pass. */
	EXPECT_LE(ROUNDS / 2, t->on_cpu1);
	EXPECT_EQ(0, t_aborts(st)) TH_LOG("%s: handlers aborted", what);
}

FIXTURE(ck) {
	void *uli;
	char cs[64];
};

FIXTURE_SETUP(ck)
{
	if (!t_upcall_mode())
		SKIP(return, "the proc method's handler is a thread: nothing to show");
	if (t_ncpus() < 2)
		SKIP(return, "needs CPU 1");
	ASSERT_EQ(0, edu_open_clean(&e, EDU_SLOT_C));
	self->cs[0] = 0;
}

FIXTURE_TEARDOWN(ck)
{
	if (self->uli)
		ULI_destroy(self->uli);
	if (self->cs[0])
		t_write_file(CS_PATH "current_clocksource", self->cs);
	edu_close_clean(&e);
}

TEST_F(ck, in_handler)
{
	struct uli_stats st;
	struct tally t;

	self->uli = reg();
	ASSERT_NE(NULL, self->uli) TH_LOG("register: %s", strerror(errno));
	rounds(&t);
	ASSERT_EQ(0, ULI_get_stats(self->uli, &st));
	report(_metadata, &t, &st, "default clocksource");
}

TEST_F(ck, on_hpet)
{
	char avail[256];
	struct uli_stats st;
	struct tally t;

	if (t_read_file(CS_PATH "available_clocksource", avail, sizeof(avail)) <= 0 ||
	    !strstr(avail, "hpet"))
		SKIP(return, "no HPET clocksource (hpet=disable?)");
	ASSERT_LT(0, t_read_file(CS_PATH "current_clocksource", self->cs, sizeof(self->cs)));
	ASSERT_EQ(0, t_write_file(CS_PATH "current_clocksource", "hpet"));
	self->uli = reg();
	ASSERT_NE(NULL, self->uli) TH_LOG("register: %s", strerror(errno));
	rounds(&t);
	ASSERT_EQ(0, ULI_get_stats(self->uli, &st));
	report(_metadata, &t, &st, "hpet");
}

/* --- fresh_process ---------------------------------------------------- */

static const char *const fresh_why[] = {
	[4] = "edu_open",
	[5] = "ULI_register_pci",
	[7] = "no call (the handler aborted?)",
	[8] = "clock_gettime() in the handler failed",
	[9] = "the handler's time is not between the owner's readings",
	[10] = "a handler was aborted",
};

/*
 * In an exec'ed copy of this program, before main(): nothing here may
 * read the clock before the handler does.  Waits are counted, not timed.
 */
static int fresh_child(void)
{
	struct uli_stats st;
	struct timespec after;
	unsigned long spins;
	void *uli;

	if (edu_open(&e, EDU_SLOT_C))
		return 4;
	uli = ULI_register_pci(e.bdf, handler, NULL, 0, NULL, 0, ULI_INTX);
	if (!uli)
		return 5;
	edu_raise(&e, 1);
	for (spins = 0; !handled && spins < 4000000000UL; spins++)
		__asm__ volatile ("pause");
	if (!handled)
		return 7;
	clock_gettime(CLOCK_MONOTONIC, &after);
	if (h_ret)
		return 8;
	if (!ns(&h_mono) || ns(&h_mono) > ns(&after))
		return 9;
	if (ULI_get_stats(uli, &st) || t_aborts(&st))
		return 10;
	ULI_destroy(uli);
	return 0;
}

__attribute__((constructor)) static void fresh_main(void)
{
	if (getenv("ULI_CLOCK_FRESH"))
		_exit(fresh_child());
}

TEST_F(ck, fresh_process)
{
	char *argv[] = { "uli_clock", NULL };
	char *envp[] = { "ULI_CLOCK_FRESH=1", "ULI_MODE=upcall", NULL };
	int status, code;
	pid_t pid;

	edu_close(&e);		/* the child opens it */
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		execve("/proc/self/exe", argv, envp);
		_exit(127);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status)) TH_LOG("child killed by signal %d", WTERMSIG(status));
	code = WEXITSTATUS(status);
	EXPECT_EQ(0, code) TH_LOG("%s", code > 0 && code <= 10 && fresh_why[code] ?
				  fresh_why[code] : "exec");
	ASSERT_EQ(0, edu_open(&e, EDU_SLOT_C));
}

TEST_HARNESS_MAIN
