// SPDX-License-Identifier: MIT
/*
 * uli_sema - ULI_sleep() and ULI_wakeup(): counting semaphores shared by
 * the handler and the process's threads.  A post that comes first is
 * latched; N handler posts wake a sleeping thread exactly N times (no
 * post lost or invented); a post from the handler is an allowed call, not
 * an abort; a bad semaphore number is EINVAL, from a thread or from the
 * handler, and changes nothing; a signal ends a sleep with EINTR; the
 * owner's ULI_destroy() ends its threads' sleeps with ENODEV.
 */
#include <pthread.h>
#include <sys/syscall.h>

#include "kselftest_harness.h"
#include "helpers.h"

#define N_POSTS		t_test_n(10)
/* How soon ULI_destroy() must have ended a sleep on the registration. */
#define DESTROY_WAKE_MS	500

static struct edu e;
static volatile uint64_t handled;
static volatile int handler_bad_ret;	/* ULI_wakeup(u, 99) from the handler */
static void *the_uli;

static void handler(void *arg)
{
	(void)arg;
	edu_ack(&e, edu_status(&e));
	handler_bad_ret = ULI_wakeup(the_uli, 99);
	ULI_wakeup(the_uli, 0);
	handled++;
}

struct sleeper {
	void *uli;
	int sema;
	uint64_t want;
	volatile uint64_t took;		/* sleeps that returned 0 */
	volatile uint64_t early;	/* ... that returned -1 */
	volatile int err;
	volatile pid_t tid;
	volatile uint64_t end_ns;	/* when a sleep last returned -1 */
	pthread_t thr;
};

static void *sleeper_fn(void *arg)
{
	struct sleeper *s = arg;

	s->tid = gettid();
	while (s->took < s->want) {
		if (ULI_sleep(s->uli, s->sema) == 0) {
			s->took++;
		} else {
			s->end_ns = t_now_ns();
			s->err = errno;
			s->early++;
			if (errno != EINTR)
				break;
		}
	}
	return NULL;
}

FIXTURE(sema) {
	void *uli;
};

FIXTURE_SETUP(sema)
{
	ASSERT_EQ(0, edu_open(&e, EDU_SLOT_C));
	handled = 0;
	self->uli = ULI_register_pci(e.bdf, handler, NULL, 2, NULL, 0, ULI_INTX);
	ASSERT_NE(NULL, self->uli) TH_LOG("ULI_register_pci: %s", strerror(errno));
	ASSERT_EQ(0, ULI_set_budget(self->uli, T_LONG_BUDGET));
	the_uli = self->uli;
}

FIXTURE_TEARDOWN(sema)
{
	if (self->uli)
		EXPECT_EQ(0, ULI_destroy(self->uli));
	edu_close(&e);
}

/* Three posts before anyone sleeps: three sleeps return at once, a fourth blocks. */
TEST_F(sema, latched)
{
	struct sleeper s = { .uli = self->uli, .sema = 1, .want = 4 };
	int i;

	for (i = 0; i < 3; i++)
		ASSERT_EQ(0, ULI_wakeup(self->uli, 1));
	ASSERT_EQ(0, pthread_create(&s.thr, NULL, sleeper_fn, &s));
	ASSERT_TRUE(t_wait_count(&s.took, 3, 2000)) TH_LOG("took %llu of 3", (unsigned long long)s.took);
	usleep(200000);
	EXPECT_EQ(3, s.took);		/* the fourth waits: nothing invented */
	EXPECT_EQ(0, s.early);
	/* Semaphore 0 is another one: posting it does not wake sema 1. */
	ASSERT_EQ(0, ULI_wakeup(self->uli, 0));
	usleep(100000);
	EXPECT_EQ(3, s.took);
	ASSERT_EQ(0, ULI_wakeup(self->uli, 1));
	EXPECT_TRUE(t_wait_count(&s.took, 4, 2000));
	pthread_join(s.thr, NULL);
	EXPECT_EQ(0, s.early);
}

/*
 * N interrupts, each handler posting sema 0 once: the sleeping thread
 * takes exactly N posts.  The handler's post of a bad semaphore fails
 * with -1 and does not end the handler.
 */
TEST_F_TIMEOUT(sema, handler_wakes_thread, 600)
{
	struct sleeper s = { .uli = self->uli, .sema = 0, .want = N_POSTS };
	struct uli_stats st;
	uint64_t i;

	handler_bad_ret = 0;
	ASSERT_EQ(0, pthread_create(&s.thr, NULL, sleeper_fn, &s));
	/*
	 * The handler's TLS is ours (it registered here): its failed post
	 * must not write our errno, which nothing else here sets.
	 */
	errno = 0;
	for (i = 0; i < N_POSTS; i++) {
		edu_raise(&e, 1);
		if (!t_wait_count(&handled, i + 1, 2000))
			break;
	}
	EXPECT_EQ(0, errno);
	EXPECT_EQ(N_POSTS, handled);
	EXPECT_TRUE(t_wait_count(&s.took, N_POSTS, 5000));
	pthread_join(s.thr, NULL);
	EXPECT_EQ(N_POSTS, s.took);
	EXPECT_EQ(0, s.early);
	EXPECT_EQ(-1, handler_bad_ret);

	/* Nothing left over: a post now is taken by exactly one sleep. */
	s.want = N_POSTS + 1;
	ASSERT_EQ(0, pthread_create(&s.thr, NULL, sleeper_fn, &s));
	usleep(100000);
	EXPECT_EQ(N_POSTS, s.took);
	ASSERT_EQ(0, ULI_wakeup(self->uli, 0));
	EXPECT_TRUE(t_wait_count(&s.took, N_POSTS + 1, 2000));
	pthread_join(s.thr, NULL);

	ASSERT_EQ(0, ULI_get_stats(self->uli, &st));
	EXPECT_EQ(N_POSTS, st.calls);
	EXPECT_EQ(0, st.aborted_syscall + st.aborted_fault + st.aborted_illegal +
		     st.aborted_fpe + st.aborted_timeout);
}

/* One thread posts, another sleeps: every post taken once. */
TEST_F_TIMEOUT(sema, thread_wakes_thread, 600)
{
	struct sleeper s = { .uli = self->uli, .sema = 1, .want = N_POSTS };
	uint64_t i;

	ASSERT_EQ(0, pthread_create(&s.thr, NULL, sleeper_fn, &s));
	for (i = 0; i < N_POSTS; i++)
		ASSERT_EQ(0, ULI_wakeup(self->uli, 1));
	EXPECT_TRUE(t_wait_count(&s.took, N_POSTS, 10000));
	pthread_join(s.thr, NULL);
	EXPECT_EQ(N_POSTS, s.took);
	EXPECT_EQ(0, s.early);
}

TEST_F(sema, bad_number)
{
	struct sleeper s = { .uli = self->uli, .sema = 0, .want = 1 };
	void *none;

	errno = 0;
	EXPECT_EQ(-1, ULI_wakeup(self->uli, 2));
	EXPECT_EQ(EINVAL, errno);
	errno = 0;
	EXPECT_EQ(-1, ULI_wakeup(self->uli, -1));
	EXPECT_EQ(EINVAL, errno);
	errno = 0;
	EXPECT_EQ(-1, ULI_sleep(self->uli, 2));
	EXPECT_EQ(EINVAL, errno);
	errno = 0;
	EXPECT_EQ(-1, ULI_sleep(NULL, 0));
	EXPECT_EQ(EINVAL, errno);

	/* The failed calls posted nothing. */
	ASSERT_EQ(0, pthread_create(&s.thr, NULL, sleeper_fn, &s));
	usleep(100000);
	EXPECT_EQ(0, s.took);
	ULI_wakeup(self->uli, 0);
	EXPECT_TRUE(t_wait_count(&s.took, 1, 2000));
	pthread_join(s.thr, NULL);

	/* No semaphores at all: every number is bad. */
	ASSERT_EQ(0, ULI_destroy(self->uli));
	self->uli = NULL;
	none = ULI_register_pci(e.bdf, handler, NULL, 0, NULL, 0, ULI_INTX);
	ASSERT_NE(NULL, none) TH_LOG("ULI_register_pci: %s", strerror(errno));
	errno = 0;
	EXPECT_EQ(-1, ULI_wakeup(none, 0));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(0, ULI_destroy(none));
	/* Too many. */
	errno = 0;
	EXPECT_EQ(NULL, ULI_register_pci(e.bdf, handler, NULL, 65, NULL, 0, ULI_INTX));
	EXPECT_EQ(EINVAL, errno);
}

static void on_usr1(int sig)
{
	(void)sig;
}

/* A signal without SA_RESTART ends a sleep: -1, EINTR, no post taken. */
TEST_F(sema, interrupted_by_signal)
{
	struct sleeper s = { .uli = self->uli, .sema = 0, .want = 1 };
	struct sigaction sa = { .sa_handler = on_usr1 };
	int i;

	sigemptyset(&sa.sa_mask);
	ASSERT_EQ(0, sigaction(SIGUSR1, &sa, NULL));
	ASSERT_EQ(0, pthread_create(&s.thr, NULL, sleeper_fn, &s));
	usleep(100000);
	/* Until it lands in the sleep (not between two sleeps). */
	for (i = 0; i < 100 && !s.early; i++) {
		pthread_kill(s.thr, SIGUSR1);
		usleep(10000);
	}
	EXPECT_LE(1, s.early);
	EXPECT_EQ(EINTR, s.err);
	EXPECT_EQ(0, s.took);
	ULI_wakeup(self->uli, 0);
	EXPECT_TRUE(t_wait_count(&s.took, 1, 2000));
	pthread_join(s.thr, NULL);
	signal(SIGUSR1, SIG_DFL);
}

/*
 * The owner's ULI_destroy() ends the sleeps of its other threads on the
 * registration, whichever semaphore: each returns -1 with ENODEV at once,
 * having taken no post, as a fork child's or a receiver's does (in
 * uli_lifecycle); and the device is free for a new registration.
 */
TEST_F(sema, destroy_ends_sleeps)
{
	struct sleeper s[3] = {
		{ .uli = self->uli, .sema = 0, .want = 1 },
		{ .uli = self->uli, .sema = 0, .want = 1 },
		{ .uli = self->uli, .sema = 1, .want = 1 },
	};
	/* Where a sleep waits: the kernel's semaphore, or libuli's futex. */
	long nr = t_upcall_mode() ? SYS_ioctl : SYS_futex;
	uint64_t t0;
	int64_t ms;
	int i, j;

	for (i = 0; i < 3; i++) {
		ASSERT_EQ(0, pthread_create(&s[i].thr, NULL, sleeper_fn, &s[i]));
		for (j = 0; j < 2000 && !s[i].tid; j++)
			t_msleep(1);
		ASSERT_NE(0, s[i].tid);
		ASSERT_TRUE(t_wait_blocked(s[i].tid, nr, 2000))
			TH_LOG("sleeper %d not asleep in syscall %ld", i, nr);
	}
	t0 = t_now_ns();
	ASSERT_EQ(0, ULI_destroy(self->uli));
	self->uli = NULL;
	for (i = 0; i < 3; i++) {
		EXPECT_TRUE(t_wait_count(&s[i].early, 1, 2000))
			TH_LOG("sleeper %d (sema %d) still asleep 2 s after ULI_destroy()",
			       i, s[i].sema);
		if (!s[i].early)
			continue;	/* not to be joined: the process's exit ends it */
		pthread_join(s[i].thr, NULL);
		EXPECT_EQ(ENODEV, s[i].err) TH_LOG("sleeper %d: %s", i, strerror(s[i].err));
		EXPECT_EQ(0, s[i].took);
		ms = (int64_t)(s[i].end_ns - t0) / 1000000;
		EXPECT_GT(DESTROY_WAKE_MS, ms) TH_LOG("sleeper %d woke %lld ms after ULI_destroy()",
						      i, (long long)ms);
	}

	self->uli = ULI_register_pci(e.bdf, handler, NULL, 2, NULL, 0, ULI_INTX);
	ASSERT_NE(NULL, self->uli) TH_LOG("ULI_register_pci after ULI_destroy: %s",
					  strerror(errno));
	the_uli = self->uli;
}

TEST_HARNESS_MAIN
