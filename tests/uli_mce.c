// SPDX-License-Identifier: MIT
/*
 * uli_mce - a machine check raised while a handler runs.  QEMU injects
 * it (its monitor's `mce`, asked for through qemu/run's ULI-MON line) on
 * the handler's CPU: an uncorrected error that a memory scrubber found
 * (SRAO: action optional, restartable), naming a page of the owner's.
 * The architecture's bookkeeping must run before the handler is ended:
 *
 *  - the handler is ended as by a fault, and the owner told (SIGSEGV);
 *  - the neighbour process the handler interrupted is neither killed nor
 *    signalled;
 *  - the named page is taken out of use (memory_failure(): the
 *    HardwareCorrupted count of /proc/meminfo grows by a page each time);
 *  - MCIP is cleared: each later injection would otherwise reset the
 *    machine.
 *
 * QEMU injects asynchronously, so a machine check can also find the CPU
 * in the kernel (an interrupt taken during the handler): that one is
 * logged and the handler runs on to its budget; the test injects again,
 * on another page.  An action-required error (SRAR) would be the more
 * telling case (do_machine_check() must then not queue the kill for the
 * interrupted task), but one that finds the kernel panics the machine,
 * as it must, and under TCG one in ten did: it is not injected here.
 *
 * The kernel recovers from machine checks only on a CPU that offers
 * recovery: QEMU's AMD model lacks SUCCOR (every uncorrected error
 * panics), so this runs in the boot that presents an Intel CPU
 * (qemu/run-tests sets CPU= and ULI_MCE=1) and skips elsewhere.
 */
#include <fcntl.h>
#include <sys/mman.h>

#include "kselftest_harness.h"
#include "helpers.h"

#define N_CHECKS	2	/* machine checks that end a handler */
#define N_PAGES		16	/* injections at most, one page each */
#define PAGE		4096ul

/*
 * IA32_MCi_STATUS: VAL, UC, EN, MISCV, ADDRV, S, and MCACOD 0xc0 (memory
 * scrubbing); MCG_STATUS: MCIP and RIPV; MCi_MISC: a physical address
 * whose lowest valid bit is 12.
 */
#define SRAO_STATUS	0xbd000000000000c0ull
#define SRAO_MCG	0x5ull
#define SRAO_MISC	((2ull << 6) | 12)

struct shared {
	volatile uint64_t ready;
	volatile uint64_t stop;
};

static struct edu e;
static struct shared *sh;
static volatile uint64_t entered;
static volatile uint64_t segv;	/* the aborts the owner was told of */

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
static int inject_mce(int mon, int cpu, uint64_t addr)
{
	char cmd[160];
	int len;

	len = snprintf(cmd, sizeof(cmd), "ULI-MON mce -b %d 1 %#llx %#llx %#llx %#llx\n",
		       cpu, (unsigned long long)SRAO_STATUS,
		       (unsigned long long)SRAO_MCG, (unsigned long long)addr,
		       (unsigned long long)SRAO_MISC);
	return write(mon, cmd, len) == len ? 0 : -1;
}

TEST(machine_check_in_handler)
{
	uint64_t addr[N_PAGES];
	struct uli_stats st;
	long hw0, hw1 = 0;
	char *victim;
	int status, mon, i, j, k, cpu = 1;
	pid_t pid;
	void *uli;

	if (!getenv("ULI_MCE"))
		SKIP(return, "needs the boot whose host injects machine checks (ULI_MCE=1)");
	if (!t_cpuinfo_has("vendor_id", "GenuineIntel") ||
	    !t_cpuinfo_has("flags", "mce") || !t_cpuinfo_has("flags", "mca"))
		SKIP(return, "needs an Intel CPU model with MCA (QEMU's AMD one panics)");
	if (t_ncpus() < 2)
		SKIP(return, "needs a second CPU for the handler");
	hw0 = t_field_kb("/proc/meminfo", "HardwareCorrupted");
	ASSERT_LE(0, hw0) TH_LOG("no HardwareCorrupted in /proc/meminfo (CONFIG_MEMORY_FAILURE?)");

	/* The pages whose memory "fails": the owner's, never touched again. */
	victim = mmap(NULL, N_PAGES * PAGE, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, victim);
	for (i = 0; i < N_PAGES; i++) {
		victim[i * PAGE] = 1;
		addr[i] = phys_of(victim + i * PAGE);
		ASSERT_NE(0, addr[i]);
	}
	mon = open("/dev/ttyS2", O_WRONLY | O_NOCTTY);
	ASSERT_LE(0, mon);
	sh = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, sh);

	ASSERT_EQ(0, edu_open(&e, EDU_SLOT_C));
	edu_ack(&e, ~0u);
	uli = ULI_register_pci(e.bdf, handler, NULL, 0, NULL, 0, ULI_INTX);
	ASSERT_NE(NULL, uli);
	if (strcmp(ULI_mode(uli), "upcall")) {
		ULI_destroy(uli);
		SKIP(return, "a property of the upcall");
	}
	ASSERT_EQ(0, ULI_set_budget(uli, T_LONG_BUDGET));
	ASSERT_EQ(0, t_set_irq_cpu(ULI_irq(uli), cpu));
	ASSERT_EQ(0, t_pin(0));
	signal(SIGSEGV, on_segv);
	/* A late machine check ends a call at its budget: a failure, not a death. */
	signal(SIGXCPU, SIG_IGN);
	pid = t_spawn(cpu, neighbour);
	while (!sh->ready)
		usleep(1000);

	/*
	 * An IO-APIC line moves to its new CPU at its next interrupt: raise
	 * until one is handled there, so that no spinning handler borrows
	 * this CPU.
	 */
	for (i = 0; i < 100 && cpu_seen != (unsigned int)cpu; i++) {
		uint64_t n = entered;

		edu_raise(&e, 1);
		ASSERT_TRUE(t_wait_count(&entered, n + 1, 10000));
	}
	ASSERT_EQ(cpu, cpu_seen);
	ASSERT_EQ(0, ULI_get_stats(uli, &st));
	ASSERT_EQ(0, st.aborted_fault + st.aborted_timeout);

	spin = true;
	for (i = k = 0; i < N_CHECKS && k < N_PAGES; k++) {
		uint64_t n = entered, s = segv;

		edu_raise(&e, 1);
		ASSERT_TRUE(t_wait_count(&entered, n + 1, 10000)) TH_LOG("raise %d not handled", k);
		ASSERT_EQ(cpu, cpu_seen);
		ASSERT_EQ(0, inject_mce(mon, cpu, addr[k]));
		/*
		 * Waited for in user mode, past the budget (1 s): a system
		 * call here could hold a lock that an interrupt on the
		 * handler's CPU then spins on, in the kernel.
		 */
		if (t_wait_count(&segv, s + 1, 1500))
			i++;
		else
			TH_LOG("injection %d found the handler's CPU in the kernel", k);
		ASSERT_EQ(0, ULI_get_stats(uli, &st));
		ASSERT_EQ(k + 1, st.aborted_fault + st.aborted_timeout);
		EXPECT_EQ(i, st.aborted_fault);
		/* memory_failure() runs from a work item. */
		for (j = 0; j < 5000 && hw1 - hw0 < (long)((k + 1) * PAGE / 1024); j++) {
			hw1 = t_field_kb("/proc/meminfo", "HardwareCorrupted");
			usleep(1000);
		}
		EXPECT_EQ((k + 1) * PAGE / 1024, hw1 - hw0) TH_LOG("page %d not taken out of use", k);
	}
	spin = false;
	ASSERT_EQ(N_CHECKS, i) TH_LOG("%d of %d injections found a handler", i, k);
	EXPECT_EQ(N_CHECKS, segv);
	EXPECT_LT(0, st.ctx_other) TH_LOG("no upcall interrupted the neighbour");

	sh->stop = 1;
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status) && !WEXITSTATUS(status))
		TH_LOG("the interrupted neighbour ended with status %#x", status);

	/* The registration goes on. */
	i = entered;
	edu_raise(&e, 1);
	EXPECT_TRUE(t_wait_count(&entered, i + 1, 10000));
	ULI_destroy(uli);
	signal(SIGSEGV, SIG_DFL);
	close(mon);
}

TEST_HARNESS_MAIN
