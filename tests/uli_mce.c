// SPDX-License-Identifier: MIT
/*
 * uli_mce - a machine check raised while a handler runs.  QEMU injects
 * it (its monitor's `mce`, asked for through qemu/run's ULI-MON line) on
 * the handler's CPU, naming a page of the owner's.  The architecture's
 * bookkeeping must run before the handler is ended, and nothing of it may
 * be charged to the task the handler interrupted:
 *
 *  - the handler is ended as by a fault, and the owner told (SIGSEGV);
 *  - the neighbour process the handler interrupted is neither killed nor
 *    signalled, and does not run the recovery of the owner's page;
 *  - the named page is taken out of use (memory_failure(): the
 *    HardwareCorrupted count of /proc/meminfo grows by a page), out of
 *    the owner's address space (reading it raises SIGBUS, BUS_MCEERR_AR);
 *    an owner that asked for early kill (PR_MCE_KILL_EARLY) is sent
 *    SIGBUS, BUS_MCEERR_AO, with the page's address;
 *  - MCIP is cleared: each later injection would otherwise reset the
 *    machine.
 *
 * Two kinds of error, each in a boot of its own (ULI_MCE=ao or ar):
 *
 *  - action optional (SRAO), a memory scrubber's: the kernel recovers
 *    wherever it lands.  QEMU injects asynchronously, so one can find
 *    the CPU in the kernel (an interrupt taken during the handler): it is
 *    logged there, the handler runs on to its budget, and the test
 *    injects again, on another page.
 *  - action required (SRAR), a data load that consumed the bad memory,
 *    no restart IP: do_machine_check() would queue the kill or the
 *    recovery on current, the interrupted task.  One that finds the
 *    kernel panics the machine, as it must (one boot of two injections in
 *    ten here, more on a busy host): qemu/run-tests boots again when the
 *    console says so.
 *
 * The kernel recovers from machine checks only on a CPU that offers
 * recovery: QEMU's AMD model lacks SUCCOR (every uncorrected error
 * panics), so this runs in boots that present an Intel CPU (qemu/run-tests
 * sets CPU= and ULI_MCE) and skips elsewhere.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <sys/klog.h>
#include <sys/mman.h>
#include <sys/prctl.h>

#include "kselftest_harness.h"
#include "helpers.h"

#define N_CHECKS	2	/* SRAO machine checks that end a handler */
#define N_PAGES		16	/* injections at most, one page each */
#define PAGE		4096ul
#define HANDLER_CPU	1	/* the handler's and the neighbour's; the owner's is 0 */

/*
 * IA32_MCi_STATUS: VAL, UC, EN, MISCV, ADDRV, S, and MCACOD 0xc0 (memory
 * scrubbing); MCG_STATUS: MCIP and RIPV.
 */
#define SRAO_STATUS	0xbd000000000000c0ull
#define SRAO_MCG	0x5ull
/*
 * The same plus AR, MCACOD 0x134 (data load); MCG_STATUS: MCIP and EIPV,
 * no RIPV (the load cannot be restarted).
 */
#define SRAR_STATUS	0xbd80000000000134ull
#define SRAR_MCG	0x6ull
/* MCi_MISC: a physical address whose lowest valid bit is 12 ... */
#define MISC_PHYS	((2ull << 6) | 12)
/* ... or a linear one, which the kernel cannot recover a page from. */
#define MISC_LINEAR	((1ull << 6) | 12)

/* What do_machine_check()'s task work prints, on the task it runs on. */
#define USER_ACCESS_MSG	"Uncorrected hardware memory error in user-access"

struct shared {
	volatile uint64_t ready;
	volatile uint64_t stop;
};

static struct edu e;
static struct shared *sh;
static volatile uint64_t entered;
static volatile uint64_t segv;	/* the aborts the owner was told of */
static volatile uint64_t xcpu;	/* the calls that ended at their budget */

static volatile bool spin;
static volatile unsigned int cpu_seen;

/* Acknowledge, say where, and with spin set run until the machine check. */
static void handler(void *arg)
{
	unsigned int aux;

	(void)arg;
	edu_ack(&e, edu_status(&e));
	__builtin_ia32_rdtscp(&aux);		/* Linux keeps the CPU in TSC_AUX */
	cpu_seen = aux & 0xfff;
	entered++;
	while (spin)
		__asm__ volatile ("pause" ::: "memory");
}

static void on_segv(int sig)
{
	(void)sig;
	segv++;
}

static void on_xcpu(int sig)
{
	(void)sig;
	xcpu++;
}

static void neighbour(void)
{
	sh->ready = 1;
	while (!sh->stop)
		;
	_exit(0);
}

/* The physical address of a resident page of ours (root reads PFNs). */
static uint64_t phys_of(void *p)
{
	uint64_t ent = 0;
	int fd = open("/proc/self/pagemap", O_RDONLY);

	if (fd < 0)
		return 0;
	if (pread(fd, &ent, sizeof(ent), (uintptr_t)p / PAGE * sizeof(ent)) != sizeof(ent))
		ent = 0;
	close(fd);
	if (!(ent & 1ull << 63))
		return 0;
	return (ent & ((1ull << 55) - 1)) * PAGE;
}

/*
 * Ask the host's monitor for a machine check on cpu, broadcast (-b) as
 * Intel's are.  mon is /dev/ttyS2, opened before any handler runs: the
 * tty's open and close may wait for every CPU (RCU), and a CPU lent to a
 * handler has no quiescent state until the handler ends.
 */
static int inject_mce(int mon, int cpu, uint64_t status, uint64_t mcg,
		      uint64_t addr, uint64_t misc)
{
	char cmd[160];
	int len;

	len = snprintf(cmd, sizeof(cmd), "ULI-MON mce -b %d 1 %#llx %#llx %#llx %#llx\n",
		       cpu, (unsigned long long)status, (unsigned long long)mcg,
		       (unsigned long long)addr, (unsigned long long)misc);
	return write(mon, cmd, len) == len ? 0 : -1;
}

/* Whether the kernel's log holds msg. */
static bool klog_has(const char *msg)
{
	static char buf[1 << 20];
	int n = klogctl(3 /* SYSLOG_ACTION_READ_ALL */, buf, sizeof(buf) - 1);

	if (n < 0)
		return false;
	buf[n] = 0;
	return strstr(buf, msg);
}

/* HardwareCorrupted grows to want kB: memory_failure() runs from a work item. */
static long wait_corrupted(long want)
{
	long kb = -1;
	int i;

	for (i = 0; i < 5000; i++) {
		kb = t_field_kb("/proc/meminfo", "HardwareCorrupted");
		if (kb >= want)
			break;
		usleep(1000);
	}
	return kb;
}

/* An INTx registration and the process its calls interrupt. */
struct ctx {
	uint64_t addr[N_PAGES];	/* physical, of the victim's pages */
	char *victim;
	long hw0;		/* HardwareCorrupted at the start, kB */
	int mon;
	pid_t pid;
	void *uli;
};

/*
 * Whether this boot's host injects machine checks of the kind asked for,
 * on a CPU that can recover from them.
 */
static const char *why_not(const char *kind)
{
	const char *env = getenv("ULI_MCE");

	if (!env || strcmp(env, kind))
		return "needs the boot whose host injects this kind of machine check (ULI_MCE)";
	if (!t_cpuinfo_has("vendor_id", "GenuineIntel") ||
	    !t_cpuinfo_has("flags", "mce") || !t_cpuinfo_has("flags", "mca"))
		return "needs an Intel CPU model with MCA (QEMU's AMD one panics)";
	if (t_ncpus() < 2)
		return "needs a second CPU for the handler";
	return NULL;
}

/*
 * Register, with the calls on CPU 1 where a neighbour process spins: the
 * handler interrupts it.  The owner stays on CPU 0.
 */
static void start(struct __test_metadata *_metadata, struct ctx *c)
{
	struct uli_stats st;
	int i;

	c->hw0 = t_field_kb("/proc/meminfo", "HardwareCorrupted");
	ASSERT_LE(0, c->hw0) TH_LOG("no HardwareCorrupted in /proc/meminfo (CONFIG_MEMORY_FAILURE?)");

	/* The pages whose memory "fails": the owner's, never touched again. */
	c->victim = mmap(NULL, N_PAGES * PAGE, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, c->victim);
	for (i = 0; i < N_PAGES; i++) {
		c->victim[i * PAGE] = 1;
		c->addr[i] = phys_of(c->victim + i * PAGE);
		ASSERT_NE(0, c->addr[i]);
	}
	c->mon = open("/dev/ttyS2", O_WRONLY | O_NOCTTY);
	ASSERT_LE(0, c->mon);
	sh = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, sh);

	ASSERT_EQ(0, edu_open(&e, EDU_SLOT_C));
	edu_ack(&e, ~0u);
	c->uli = ULI_register_pci(e.bdf, handler, NULL, 0, NULL, 0, ULI_INTX);
	ASSERT_NE(NULL, c->uli);
	if (strcmp(ULI_mode(c->uli), "upcall")) {
		ULI_destroy(c->uli);
		SKIP(return, "a property of the upcall");
	}
	ASSERT_EQ(0, ULI_set_budget(c->uli, T_LONG_BUDGET));
	ASSERT_EQ(0, t_set_irq_cpu(ULI_irq(c->uli), HANDLER_CPU));
	ASSERT_EQ(0, t_pin(0));
	signal(SIGSEGV, on_segv);
	/* A call the machine check reaches late ends at its budget: not a death. */
	signal(SIGXCPU, on_xcpu);
	c->pid = t_spawn(HANDLER_CPU, neighbour);
	ASSERT_LT(0, c->pid);
	while (!sh->ready)
		usleep(1000);

	/*
	 * An IO-APIC line moves to its new CPU at its next interrupt: raise
	 * until one is handled there, so that no spinning handler borrows
	 * this CPU.
	 */
	for (i = 0; i < 100 && cpu_seen != HANDLER_CPU; i++) {
		uint64_t n = entered;

		edu_raise(&e, 1);
		ASSERT_TRUE(t_wait_count(&entered, n + 1, 10000));
	}
	ASSERT_EQ(HANDLER_CPU, cpu_seen);
	ASSERT_EQ(0, ULI_get_stats(c->uli, &st));
	ASSERT_EQ(0, st.aborted_fault + st.aborted_timeout);
	spin = true;
}

/*
 * A raise whose call spins on the handler's CPU, and a machine check
 * asked for there; whether the owner was told of an abort.  Without
 * rearm, within the budget: else the machine check found that CPU in the
 * kernel, or came after the budget.  With rearm, a call that ends at its
 * budget is followed by another at once, for 10 s: QEMU's answer can take
 * longer than a budget on a busy host, and a late machine check must
 * find a handler, not the neighbour (whose user code it would rightly
 * kill, were it action required).
 */
static bool check_handler(struct __test_metadata *_metadata, struct ctx *c, bool rearm,
			  uint64_t status, uint64_t mcg, uint64_t addr, uint64_t misc)
{
	uint64_t n = entered, s = segv, x = xcpu, end;

	edu_raise(&e, 1);
	ASSERT_TRUE(t_wait_count(&entered, n + 1, 10000)) TH_LOG("raise not handled");
	EXPECT_EQ(HANDLER_CPU, cpu_seen);
	EXPECT_EQ(0, inject_mce(c->mon, HANDLER_CPU, status, mcg, addr, misc));
	/*
	 * Waited for in user mode, past the budget (1 s): a system call here
	 * could hold a lock that an interrupt on the handler's CPU then spins
	 * on, in the kernel.  The raise is an MMIO write.
	 */
	if (!rearm)
		return t_wait_count(&segv, s + 1, 1500);
	end = t_now_ns() + 10 * 1000000000ull;
	while (segv == s) {
		if (xcpu != x) {
			x = xcpu;
			edu_raise(&e, 1);
		}
		if (t_now_ns() > end)
			return false;
	}
	return true;
}

static sigjmp_buf bus_jb;
static volatile int bus_code;

static void on_bus(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	bus_code = si->si_code;
	siglongjmp(bus_jb, 1);
}

/*
 * The si_code of the SIGBUS that reading p raises, 0 for none: memory
 * taken out of use is unmapped from its owner, who gets BUS_MCEERR_AR.
 */
static int read_signals(volatile char *p)
{
	struct sigaction sa = { .sa_sigaction = on_bus, .sa_flags = SA_SIGINFO };
	struct sigaction old;

	bus_code = 0;
	sigaction(SIGBUS, &sa, &old);
	if (!sigsetjmp(bus_jb, 1))
		(void)*p;
	sigaction(SIGBUS, &old, NULL);
	return bus_code;
}

static volatile int early_code;
static void *volatile early_addr;

static void on_early_bus(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	early_code = si->si_code;
	early_addr = si->si_addr;
}

/* The neighbour ran on and ends normally; the registration goes on. */
static void finish(struct __test_metadata *_metadata, struct ctx *c)
{
	int status;
	uint64_t i;

	spin = false;
	sh->stop = 1;
	ASSERT_EQ(c->pid, waitpid(c->pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status) && !WEXITSTATUS(status))
		TH_LOG("the interrupted neighbour ended with status %#x", status);

	i = entered;
	edu_raise(&e, 1);
	EXPECT_TRUE(t_wait_count(&entered, i + 1, 10000));
	ULI_destroy(c->uli);
	signal(SIGSEGV, SIG_DFL);
	close(c->mon);
}

/*
 * No state of its own: a fixture for the timeout.  Enabling the device
 * (the sysfs write that routes its interrupt) alone took 27 s on the
 * debug kernel under TCG, and an injection may wait 10 s for its answer.
 */
FIXTURE(mce) {
	int unused;
};

FIXTURE_SETUP(mce)
{
}

FIXTURE_TEARDOWN(mce)
{
}

/* Action optional: recovered wherever it lands; the test retries the kernel. */
TEST_F_TIMEOUT(mce, machine_check_in_handler, 180)
{
	const char *why = why_not("ao");
	struct uli_stats st;
	struct ctx c;
	long hw1;
	int i, k;

	if (why)
		SKIP(return, "%s", why);
	start(_metadata, &c);
	if (_metadata->exit_code == KSFT_SKIP)
		return;
	for (i = k = 0; i < N_CHECKS && k < N_PAGES; k++) {
		if (check_handler(_metadata, &c, false, SRAO_STATUS, SRAO_MCG, c.addr[k], MISC_PHYS))
			i++;
		else
			TH_LOG("injection %d found the handler's CPU in the kernel", k);
		ASSERT_EQ(0, ULI_get_stats(c.uli, &st));
		ASSERT_EQ(k + 1, st.aborted_fault + st.aborted_timeout);
		EXPECT_EQ(i, st.aborted_fault);
		hw1 = wait_corrupted(c.hw0 + (k + 1) * PAGE / 1024);
		EXPECT_EQ((k + 1) * PAGE / 1024, hw1 - c.hw0) TH_LOG("page %d not taken out of use", k);
	}
	ASSERT_EQ(N_CHECKS, i) TH_LOG("%d of %d injections found a handler", i, k);
	/* Taken out of the owner's address space. */
	EXPECT_EQ(BUS_MCEERR_AR, read_signals(c.victim));
	EXPECT_EQ(0, read_signals(c.victim + (N_PAGES - 1) * PAGE));
	EXPECT_EQ(N_CHECKS, segv);
	EXPECT_LT(0, st.ctx_other) TH_LOG("no upcall interrupted the neighbour");
	finish(_metadata, &c);
}

/*
 * Action required, twice: an address the kernel cannot recover a page
 * from (mainline would kill current, here the neighbour), then one it can
 * (mainline would recover the page from current's return to user and say
 * so in the log).  The second also shows MCIP cleared by the first.
 */
TEST_F_TIMEOUT(mce, action_required_in_handler, 180)
{
	const char *why = why_not("ar");
	struct uli_stats st;
	struct ctx c;
	long hw1;

	if (why)
		SKIP(return, "%s", why);
	ASSERT_FALSE(klog_has(USER_ACCESS_MSG));
	start(_metadata, &c);
	if (_metadata->exit_code == KSFT_SKIP)
		return;

	ASSERT_TRUE(check_handler(_metadata, &c, true, SRAR_STATUS, SRAR_MCG, c.addr[0], MISC_LINEAR))
		TH_LOG("the handler was not ended");
	ASSERT_EQ(0, ULI_get_stats(c.uli, &st));
	EXPECT_EQ(1, st.aborted_fault);
	/* A kill queued on the neighbour would take it at its return to user, now. */
	usleep(20000);
	EXPECT_EQ(0, waitpid(c.pid, NULL, WNOHANG)) TH_LOG("the interrupted neighbour ended");

	/* An owner that asks to be told early learns which page it lost. */
	ASSERT_EQ(0, prctl(PR_MCE_KILL, PR_MCE_KILL_SET, PR_MCE_KILL_EARLY, 0, 0));
	ASSERT_EQ(0, sigaction(SIGBUS, &(struct sigaction){ .sa_sigaction = on_early_bus,
							    .sa_flags = SA_SIGINFO }, NULL));
	ASSERT_TRUE(check_handler(_metadata, &c, true, SRAR_STATUS, SRAR_MCG, c.addr[1], MISC_PHYS))
		TH_LOG("the handler was not ended");
	ASSERT_EQ(0, ULI_get_stats(c.uli, &st));
	EXPECT_EQ(2, st.aborted_fault);
	EXPECT_EQ(2, segv);
	if (st.aborted_timeout)
		TH_LOG("%llu calls ended at their budget before a machine check came",
		       (unsigned long long)st.aborted_timeout);
	hw1 = wait_corrupted(c.hw0 + PAGE / 1024);
	EXPECT_EQ(PAGE / 1024, hw1 - c.hw0) TH_LOG("the page was not taken out of use");
	EXPECT_EQ(BUS_MCEERR_AO, early_code);
	EXPECT_EQ(c.victim + PAGE, early_addr);
	/* ... from the owner's address space, not the neighbour's. */
	EXPECT_EQ(BUS_MCEERR_AR, read_signals(c.victim + PAGE));
	EXPECT_EQ(0, read_signals(c.victim));
	EXPECT_LT(0, st.ctx_other) TH_LOG("no upcall interrupted the neighbour");
	/* Time for a wrongly queued task work: the neighbour returns to user at every tick. */
	usleep(100000);
	EXPECT_FALSE(klog_has(USER_ACCESS_MSG)) TH_LOG("the neighbour ran the owner's page's recovery");
	finish(_metadata, &c);
}

TEST_HARNESS_MAIN
