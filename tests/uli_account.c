// SPDX-License-Identifier: MIT
/*
 * uli_account - whose CPU time a handler uses: its owner's.
 *
 * The owner is a child process that registers edu@5's INTx with a handler
 * that burns 1 ms of CPU per call and does not acknowledge while a storm
 * is on, so that it is called again and again (at a CPU share of 900
 * thousandths in the upcall method).  The handler adds up the time it
 * ran (H) in a shared page.  Over a window of W:
 *
 *  - neighbour: a process spinning on the interrupt's CPU, with
 *    RLIMIT_CPU 2 s, is not charged the handlers' time (in the upcall
 *    method, its CPU time is at most W - 0.7 H and it gets no SIGXCPU
 *    from a 3 s storm); the owner, whose threads all sleep, is charged it (its
 *    CPU time and its user time in /proc/<pid>/stat at least 0.7 H), and
 *    none of its threads is.
 *  - owner_rlimit: the owner's own RLIMIT_CPU (1 s) sends it SIGXCPU
 *    once its handlers ran 1 s, though its only thread sleeps.
 *  - not_idle: with nothing else running there, the CPUs' idle time in
 *    /proc/stat falls by at least 0.7 H, their user time grows by it.
 *  - cgroup: the owner's cgroup v2 cpu.stat grows by the handlers' time
 *    (usage_usec and user_usec); with cpu.max at 20 % the handlers take
 *    at most about that, and still run (upcall method: the proc method's
 *    handler thread is SCHED_FIFO, which cpu.max does not bound).
 * Both methods: under ULI_MODE=proc the handler is a thread of the owner
 * and gets all of this from the scheduler; the upcall method must match.
 */
#include <signal.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "kselftest_harness.h"
#include "helpers.h"

#define CG		"/sys/fs/cgroup/uli_account"
#define BURN_NS		1000000ull

struct shared {
	volatile uint64_t calls;
	volatile uint64_t burned_ns;	/* H: the handlers' own clock */
	volatile int burn;		/* storm on: burn, do not acknowledge */
	volatile int ready;		/* owner registered (1) or failed (-errno) */
	volatile int upcall;		/* the owner's method is the upcall */
	volatile int xcpu;		/* the neighbour got SIGXCPU */
	volatile int owner_sig;		/* a signal the owner got */
	volatile int rlimit;		/* the owner sets RLIMIT_CPU 1 s */
	volatile uint64_t xcpu_at_ns;	/* the owner's CPU time at its SIGXCPU */
};

static struct edu e;
static struct shared *sh;

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static void handler(void *arg)
{
	uint64_t t0, t;

	(void)arg;
	if (!sh->burn) {
		edu_ack(&e, edu_status(&e));
		return;
	}
	t0 = mono_ns();
	do
		t = mono_ns();
	while (t - t0 < BURN_NS);
	sh->burned_ns += t - t0;
	sh->calls++;
}

static void on_owner_signal(int sig)
{
	struct timespec ts;

	/* RLIMIT_CPU's, then one more each second: the first is timed. */
	if (sig == SIGXCPU && sh->rlimit) {
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
		if (!sh->xcpu_at_ns)
			sh->xcpu_at_ns = ts.tv_sec * 1000000000ull + ts.tv_nsec;
		return;
	}
	sh->owner_sig = sig;
}

/* The owner: join @cg (if any), register on CPU @cpu's side, sleep. */
static void owner(const char *cg, int cpu)
{
	static const int sigs[] = { SIGXCPU, SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGSYS };
	void *uli;
	int i;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	/* An aborted call is logged, and fails the test: it should not be. */
	for (i = 0; i < 6; i++)
		signal(sigs[i], on_owner_signal);
	if (sh->rlimit) {
		struct rlimit rl = { 1, RLIM_INFINITY };

		setrlimit(RLIMIT_CPU, &rl);
	}
	t_pin(cpu);
	uli = t_owner_register(&e, cg, handler, sh, &sh->ready);
	sh->upcall = !strcmp(ULI_mode(uli), "upcall");
	if (sh->upcall)
		ULI_set_share(uli, ULI_MAX_SHARE);
	/* 1 ms calls; a loaded host stalls a TCG vCPU for a while at times */
	ULI_set_budget(uli, 100000000);
	sh->ready = 1;
	for (;;)
		pause();
}

static void on_xcpu(int sig)
{
	(void)sig;
	sh->xcpu = 1;
}

/* The neighbour: RLIMIT_CPU 2 s, then spin. */
static void neighbour(void)
{
	struct rlimit rl = { 2, RLIM_INFINITY };

	signal(SIGXCPU, on_xcpu);
	setrlimit(RLIMIT_CPU, &rl);
	for (;;)
		__asm__ volatile ("" ::: "memory");
}

/* CPU time of process @pid so far, in ns. */
static uint64_t proc_cpu_ns(pid_t pid)
{
	struct timespec ts;
	clockid_t clk;

	if (clock_getcpuclockid(pid, &clk) || clock_gettime(clk, &ts))
		return 0;
	return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* utime of /proc/@pid/stat (field 14), in ns. */
static uint64_t proc_utime_ns(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long ut = 0;
	int i;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	if (t_read_file(path, buf, sizeof(buf)) <= 0 || !(p = strrchr(buf, ')')))
		return 0;
	for (i = 2; i < 14 && p; i++)
		p = strchr(p + 1, ' ');
	if (p)
		sscanf(p + 1, "%llu", &ut);
	return ut * (1000000000ull / sysconf(_SC_CLK_TCK));
}

/* Time of one thread (@tid) of another process, in ns: its own clock. */
static uint64_t thread_cpu_ns(pid_t pid, pid_t tid)
{
	char path[64], buf[1024], *p;
	unsigned long long ut = 0, st = 0;
	int i;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", pid, tid);
	if (t_read_file(path, buf, sizeof(buf)) <= 0 || !(p = strrchr(buf, ')')))
		return 0;
	for (i = 2; i < 14 && p; i++)
		p = strchr(p + 1, ' ');
	if (p)
		sscanf(p + 1, "%llu %llu", &ut, &st);
	return (ut + st) * (1000000000ull / sysconf(_SC_CLK_TCK));
}

/* user+nice and idle of /proc/stat's line @name ("cpu", "cpu1"), in ns. */
static void stat_times(const char *name, uint64_t *user, uint64_t *idle)
{
	unsigned long long u = 0, n = 0, s, i = 0;
	char buf[8192], want[16], *p;

	snprintf(want, sizeof(want), "\n%s ", name);
	buf[0] = '\n';
	if (t_read_file("/proc/stat", buf + 1, sizeof(buf) - 1) > 0 &&
	    (p = strstr(buf, want)))
		sscanf(p + strlen(want), "%llu %llu %llu %llu", &u, &n, &s, &i);
	*user = (u + n) * (1000000000ull / sysconf(_SC_CLK_TCK));
	*idle = i * (1000000000ull / sysconf(_SC_CLK_TCK));
}

/* A field of @cg's cpu.stat, in ns. */
static uint64_t cg_stat_ns(const char *key)
{
	char buf[1024], want[32], *p;
	unsigned long long v = 0;

	snprintf(want, sizeof(want), "%s ", key);
	if (t_read_file(CG "/cpu.stat", buf, sizeof(buf)) > 0 && (p = strstr(buf, want)))
		sscanf(p + strlen(want), "%llu", &v);
	return v * 1000;
}

FIXTURE(acct) {
	pid_t owner, spinner;
	int cpu;		/* the interrupt's */
	bool cg;
};

FIXTURE_SETUP(acct)
{
	self->owner = self->spinner = -1;
	self->cg = false;
	if (t_ncpus() < 2)
		SKIP(return, "needs 2 CPUs");
	sh = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, sh);
	ASSERT_EQ(0, edu_open_clean(&e, EDU_SLOT_C));
	self->cpu = t_irq_cpu(e.irq);
	ASSERT_LE(0, self->cpu);
	t_pin((self->cpu + 1) % t_ncpus());
}

FIXTURE_TEARDOWN(acct)
{
	sh->burn = 0;
	if (self->spinner > 0)
		t_stop(self->spinner);
	if (self->owner > 0) {
		kill(self->owner, SIGKILL);
		waitpid(self->owner, NULL, 0);
	}
	edu_ack(&e, ~0u);
	if (self->cg)
		rmdir(CG);
	edu_close_clean(&e);
}

static void start_owner(struct __test_metadata *_metadata, FIXTURE_DATA(acct) *self,
			const char *cg)
{
	int i;

	self->owner = fork();
	ASSERT_LE(0, self->owner);
	if (self->owner == 0)
		owner(cg, (self->cpu + 1) % t_ncpus());
	for (i = 0; i < 1000 && !sh->ready; i++)
		t_msleep(10);
	ASSERT_EQ(1, sh->ready) TH_LOG("owner: %s", strerror(-sh->ready));
	/*
	 * The line on self->cpu, the neighbour's: requesting it may have
	 * put it on another CPU.  An INTx line moves at its next interrupt.
	 */
	ASSERT_LE(0, t_set_irq_cpu(e.irq, self->cpu));
	for (i = 0; i < 100 && t_irq_cpu(e.irq) != self->cpu; i++) {
		edu_raise(&e, 1);
		t_msleep(10);
	}
	ASSERT_EQ(self->cpu, t_irq_cpu(e.irq));
}

/* A storm of @ms; returns the handlers' time H in it. */
static uint64_t storm(unsigned int ms)
{
	uint64_t h = sh->burned_ns;

	sh->burn = 1;
	edu_raise(&e, 1);
	t_msleep(ms);
	sh->burn = 0;
	edu_ack(&e, ~0u);
	t_msleep(50);		/* the last call ends */
	if (sh->owner_sig)
		printf("# the owner got signal %d (%s)\n", sh->owner_sig,
		       strsignal(sh->owner_sig));
	return sh->burned_ns - h;
}

#define MS(ns)	((unsigned long long)(ns) / 1000000)

TEST_F_TIMEOUT(acct, neighbour, 120)
{
	uint64_t n0, n1, o0, o1, u0, u1, m0, m1, h, w, t0;

	start_owner(_metadata, self, NULL);
	self->spinner = t_spawn(self->cpu, neighbour);
	ASSERT_LT(0, self->spinner);
	t_msleep(100);

	t0 = mono_ns();
	n0 = proc_cpu_ns(self->spinner);
	o0 = proc_cpu_ns(self->owner);
	u0 = proc_utime_ns(self->owner);
	m0 = thread_cpu_ns(self->owner, self->owner);
	h = storm(3000);
	w = mono_ns() - t0;
	n1 = proc_cpu_ns(self->spinner);
	o1 = proc_cpu_ns(self->owner);
	u1 = proc_utime_ns(self->owner);
	m1 = thread_cpu_ns(self->owner, self->owner);
	TH_LOG("%s: %llu ms window, handlers %llu ms in %llu calls; neighbour %llu ms; owner %llu ms (utime %llu ms, its thread %llu ms)",
	       sh->upcall ? "upcall" : "proc", MS(w), MS(h), (unsigned long long)sh->calls,
	       MS(n1 - n0), MS(o1 - o0), MS(u1 - u0), MS(m1 - m0));

	EXPECT_EQ(0, sh->owner_sig) TH_LOG("the owner got a signal: a call was aborted");
	ASSERT_LT(w / 4, h) TH_LOG("the storm did not take");
	EXPECT_LE(h * 7 / 10, o1 - o0) TH_LOG("the owner was not charged");
	EXPECT_GT(h / 5, m1 - m0) TH_LOG("its thread was charged");
	/*
	 * User time in the upcall method, where the kernel says so.  The
	 * proc method's thread is sampled as any thread: its clock calls
	 * are system time when the clocksource has no vDSO mode (uli_clock
	 * may leave the HPET behind, if the TSC was found unstable).
	 */
	if (sh->upcall) {
		EXPECT_LE(h * 6 / 10, u1 - u0) TH_LOG("not as user time");
		/*
		 * It ran on the neighbour's CPU, and must not count as its.
		 * (The proc method's handler thread runs beside its owner,
		 * on the other CPU.)
		 */
		EXPECT_EQ(0, sh->xcpu) TH_LOG("the neighbour was charged the handlers' time");
		EXPECT_GT(w - h * 7 / 10, n1 - n0);
		EXPECT_GT(o1 - o0, h * 9 / 10);
		EXPECT_LT(o1 - o0, h * 13 / 10);
	}
}

/*
 * The owner's own RLIMIT_CPU (1 s) fires on its handlers' time, while its
 * only thread sleeps in pause(): SIGXCPU once its CPU time passed 1 s.
 */
TEST_F_TIMEOUT(acct, owner_rlimit, 120)
{
	uint64_t h;

	sh->rlimit = 1;
	start_owner(_metadata, self, NULL);
	t_msleep(100);
	h = storm(2500);
	TH_LOG("%s: handlers %llu ms; the owner's SIGXCPU at %llu ms of its CPU time",
	       sh->upcall ? "upcall" : "proc", MS(h), MS(sh->xcpu_at_ns));
	EXPECT_EQ(0, sh->owner_sig) TH_LOG("the owner got a signal: a call was aborted");
	ASSERT_LT(1500000000ull, h) TH_LOG("the storm did not take");
	EXPECT_NE(0, sh->xcpu_at_ns) TH_LOG("no SIGXCPU for the owner's RLIMIT_CPU");
	EXPECT_LE(950000000ull, sh->xcpu_at_ns) TH_LOG("SIGXCPU before 1 s of CPU time");
}

TEST_F_TIMEOUT(acct, not_idle, 120)
{
	uint64_t cu0, ci0, cu1, ci1, au0, ai0, au1, ai1, h, w, t0;
	char name[16];

	start_owner(_metadata, self, NULL);
	t_msleep(100);
	snprintf(name, sizeof(name), "cpu%d", self->cpu);
	t0 = mono_ns();
	stat_times("cpu", &au0, &ai0);
	stat_times(name, &cu0, &ci0);
	h = storm(1500);
	stat_times("cpu", &au1, &ai1);
	stat_times(name, &cu1, &ci1);
	w = mono_ns() - t0;
	TH_LOG("%s: %llu ms window, handlers %llu ms; all CPUs: user %llu ms, idle %llu ms; %s: user %llu ms, idle %llu ms",
	       sh->upcall ? "upcall" : "proc", MS(w), MS(h), MS(au1 - au0), MS(ai1 - ai0),
	       name, MS(cu1 - cu0), MS(ci1 - ci0));

	EXPECT_EQ(0, sh->owner_sig) TH_LOG("the owner got a signal: a call was aborted");
	ASSERT_LT(w / 4, h) TH_LOG("the storm did not take");
	EXPECT_GT(t_ncpus() * w - h * 7 / 10, ai1 - ai0) TH_LOG("handler time counted as idle");
	if (sh->upcall) {	/* user time: see the neighbour case */
		EXPECT_LE(h * 7 / 10, au1 - au0) TH_LOG("handler time not counted as user time");
		EXPECT_GT(w - h * 7 / 10, ci1 - ci0);
		EXPECT_LE(h * 7 / 10, cu1 - cu0);
	}
}

TEST_F_TIMEOUT(acct, cgroup, 120)
{
	uint64_t us0, us1, uu0, uu1, h, w, t0;

	if (access("/sys/fs/cgroup/cgroup.procs", F_OK))
		SKIP(return, "no cgroup v2 hierarchy at /sys/fs/cgroup");
	rmdir(CG);
	if (t_write_file("/sys/fs/cgroup/cgroup.subtree_control", "+cpu") < 0)
		SKIP(return, "no cpu controller: %s", strerror(errno));
	ASSERT_EQ(0, mkdir(CG, 0755));
	self->cg = true;
	start_owner(_metadata, self, CG);
	t_msleep(100);

	t0 = mono_ns();
	us0 = cg_stat_ns("usage_usec");
	uu0 = cg_stat_ns("user_usec");
	h = storm(1500);
	us1 = cg_stat_ns("usage_usec");
	uu1 = cg_stat_ns("user_usec");
	w = mono_ns() - t0;
	TH_LOG("%s: %llu ms window, handlers %llu ms; cpu.stat usage %llu ms, user %llu ms",
	       sh->upcall ? "upcall" : "proc", MS(w), MS(h), MS(us1 - us0), MS(uu1 - uu0));
	EXPECT_EQ(0, sh->owner_sig) TH_LOG("the owner got a signal: a call was aborted");
	ASSERT_LT(w / 4, h) TH_LOG("the storm did not take");
	EXPECT_LE(h * 7 / 10, us1 - us0) TH_LOG("cpu.stat usage_usec without the handlers");
	if (sh->upcall)		/* see the neighbour case */
		EXPECT_LE(h * 6 / 10, uu1 - uu0) TH_LOG("cpu.stat user_usec without the handlers");

	/*
	 * cpu.max: 20 ms in every 100 ms, handlers included.  Not for the
	 * proc method's handler thread: it is SCHED_FIFO, and cpu.max
	 * bounds the fair class only.
	 */
	if (!sh->upcall)
		return;
	ASSERT_EQ(0, t_write_file(CG "/cpu.max", "20000 100000") < 0);
	t_msleep(200);
	t0 = mono_ns();
	h = storm(2000);
	w = mono_ns() - t0;
	TH_LOG("cpu.max 20000 100000: %llu ms window, handlers %llu ms (%llu permille)",
	       MS(w), MS(h), (unsigned long long)(h * 1000 / w));
	EXPECT_GT(w * 3 / 10, h) TH_LOG("cpu.max does not hold the handlers");
	EXPECT_LT(w / 20, h) TH_LOG("handlers held for good");
	ASSERT_EQ(0, t_write_file(CG "/cpu.max", "max 100000") < 0);
	t_msleep(200);
	h = storm(500);
	EXPECT_LT(500 * 1000000ull / 4, h) TH_LOG("still held after cpu.max is lifted");
}

TEST_HARNESS_MAIN
