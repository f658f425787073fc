// SPDX-License-Identifier: MIT
/*
 * uli_kvm - a handler borrows a KVM vCPU thread.  A neighbour process,
 * pinned to the CPU that takes edu's interrupt, runs a minimal KVM guest
 * (real mode) that sets its TSC_AUX to G and then reads it back with
 * RDTSCP in a loop, counting the reads that are not G; every 2^16 reads
 * it exits to its vCPU thread with an OUT, which copies the counts out.
 * The owner raises N interrupts; its handler reads TSC_AUX with RDTSCP.
 *
 * The vCPU thread spends its time in KVM_RUN, in the guest or in the host
 * kernel around it (the run loop, exit handling, the ioctl): an interrupt
 * that comes in guest mode makes a #VMEXIT and is taken when the run loop
 * enables interrupts, in the kernel context of the vCPU thread like the
 * others, so nearly all upcalls count as "kernel" (ctx_kernel), hardly any
 * as "other" (the thread in user mode between two KVM_RUNs).  There the
 * guest's TSC_AUX is loaded (KVM switches it through a user-return
 * notifier, with the host's value put back on the way to user mode).  The handler must see the host's TSC_AUX (Linux keeps the CPU
 * number there), never G; and the guest must see G all along: whatever
 * the upcall does to the MSR for its handler, KVM's idea of what is
 * loaded must stay true when the run loop enters the guest again.  (An
 * upcall that fires KVM's user-return notifier puts the host's value
 * back while SVM's guest_state_loaded stays set: the guest then reads the
 * host's TSC_AUX until its next exit to user mode.  And an interrupt
 * between kvm_set_user_return_msr()'s WRMSR and its registration of the
 * notifier leaves the guest's value to the handler.)
 */
#include <cpuid.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <linux/kvm.h>

#include "kselftest_harness.h"
#include "helpers.h"

#define N_RAISES	t_test_n(20)

#define MSR_TSC_AUX	0xc0000103u
#define GUEST_AUX	0x5a5au		/* G: no CPU number of ours */

/* Guest ports (OUT exits) */
#define PORT_HELLO	0x10	/* first instruction: KVM runs the guest */
#define PORT_READY	0x11	/* TSC_AUX written and read back once */
#define PORT_TICK	0x12	/* every 2^16 RDTSCPs: counts in memory */
#define PORT_FAULT	0x1f	/* an exception; the vector in %al */

/* Guest physical layout: one 64 KiB slot at 0, real mode, CS = DS = 0. */
#define GUEST_MEM	0x10000
#define G_MISMATCH	0x800	/* reads that were not G */
#define G_ROUNDS	0x804	/* rounds of 2^16 reads */
#define G_LAST_BAD	0x808	/* the last value that was not G */
#define G_INITIAL	0x80c	/* the read right after the WRMSR */
#define G_FIRST_BAD	0x810	/* the first value that was not G */
#define G_STUBS		0xf00	/* exception stubs, 4 bytes a vector */
#define G_CODE		0x1000
#define S(x)		#x
#define XS(x)		S(x)

/*
 * The guest, 16-bit code copied to G_CODE.  %esi counts mismatches, %edi
 * rounds, %ebx the reads of a round; RDTSCP writes %eax, %edx, %ecx.
 */
extern const unsigned char uli_kvm_guest[], uli_kvm_guest_end[];
__asm__(
	".pushsection .rodata\n"
	".code16\n"
	"uli_kvm_guest:\n"
	"	outb %al, $" XS(PORT_HELLO) "\n"
	"	movl $" XS(MSR_TSC_AUX) ", %ecx\n"
	"	movl $" XS(GUEST_AUX) ", %eax\n"
	"	xorl %edx, %edx\n"
	"	wrmsr\n"
	"	rdtscp\n"
	"	movl %ecx, (" XS(G_INITIAL) ")\n"
	"	outb %al, $" XS(PORT_READY) "\n"
	"	xorl %esi, %esi\n"
	"	xorl %edi, %edi\n"
	"1:	movl $0x10000, %ebx\n"
	"2:	rdtscp\n"
	"	cmpl $" XS(GUEST_AUX) ", %ecx\n"
	"	je 3f\n"
	"	incl %esi\n"
	"	movl %ecx, (" XS(G_LAST_BAD) ")\n"
	"	cmpl $1, %esi\n"
	"	jne 3f\n"
	"	movl %ecx, (" XS(G_FIRST_BAD) ")\n"
	"3:	decl %ebx\n"
	"	jnz 2b\n"
	"	incl %edi\n"
	"	movl %esi, (" XS(G_MISMATCH) ")\n"
	"	movl %edi, (" XS(G_ROUNDS) ")\n"
	"	outb %al, $" XS(PORT_TICK) "\n"
	"	jmp 1b\n"
	"uli_kvm_guest_end:\n"
	".code64\n"
	".popsection\n");

enum { ST_START, ST_HELLO, ST_READY, ST_DONE, ST_SKIP = -1, ST_ERROR = -2 };

/* The vCPU process's reports, in a shared page. */
struct shared {
	volatile int state;
	volatile int stop;		/* from the owner: no KVM_RUN after the next tick */
	volatile uint32_t initial;	/* the guest's first read after its WRMSR */
	volatile uint32_t mismatches;	/* the guest's count, at its last tick */
	volatile uint32_t rounds;
	volatile uint32_t first_bad, last_bad;
	volatile uint64_t ticks;	/* PORT_TICK exits */
	volatile uint64_t bad_ticks;	/* ticks whose round saw a mismatch */
	volatile uint64_t other_exits;	/* exits but for our ports (none expected) */
	volatile uint64_t kvm_aux;	/* KVM_GET_MSRS TSC_AUX at the end */
	volatile int cpu_moved;		/* a tick found the thread off its CPU */
	volatile uint32_t host_aux;	/* RDTSCP in the vCPU process, on its CPU */
	volatile int vm_fd;		/* names the VM's directory in debugfs */
	char msg[160];
};

static struct shared *sh;
static struct edu e;
static int target;			/* the CPU that takes the interrupt */
static uint32_t host_aux;		/* its TSC_AUX in Linux: node << 12 | CPU */

static volatile uint64_t handled;
static volatile uint64_t saw_guest, saw_cpu, saw_other;
static volatile uint32_t other_aux;

static inline uint32_t rdtscp_aux(void)
{
	uint32_t lo, hi, aux;

	__asm__ volatile ("rdtscp" : "=a" (lo), "=d" (hi), "=c" (aux));
	return aux;
}

static void handler(void *arg)
{
	uint32_t aux = rdtscp_aux();

	(void)arg;
	edu_ack(&e, edu_status(&e));
	if (aux == GUEST_AUX) {
		saw_guest++;
	} else if (aux == host_aux) {
		saw_cpu++;
	} else {
		other_aux = aux;
		saw_other++;
	}
	handled++;
}

static bool cpu_has_rdtscp(void)
{
	unsigned int a, b, c, d;

	return __get_cpuid(0x80000001, &a, &b, &c, &d) && (d & (1u << 27));
}

/* --- The vCPU process ---------------------------------------------------- */

static void vcpu_fail(int state, const char *what, int err)
{
	snprintf(sh->msg, sizeof(sh->msg), "%s%s%s", what, err ? ": " : "",
		 err ? strerror(err) : "");
	sh->state = state;
}

#define FAIL(state, what, err) do { vcpu_fail(state, what, err); return; } while (0)

/* KVM's CPUID, so that the guest has RDTSCP (else KVM intercepts it). */
static int set_cpuid(int kvm, int vcpu)
{
	struct kvm_cpuid2 *c;
	bool rdtscp = false;
	unsigned int i;
	int ret = -1;

	c = calloc(1, sizeof(*c) + 256 * sizeof(c->entries[0]));
	if (!c)
		return -1;
	c->nent = 256;
	if (ioctl(kvm, KVM_GET_SUPPORTED_CPUID, c)) {
		vcpu_fail(ST_SKIP, "KVM_GET_SUPPORTED_CPUID", errno);
		goto out;
	}
	for (i = 0; i < c->nent; i++)
		if (c->entries[i].function == 0x80000001 && (c->entries[i].edx & (1u << 27)))
			rdtscp = true;
	if (!rdtscp) {
		vcpu_fail(ST_SKIP, "KVM offers no RDTSCP to guests", 0);
		goto out;
	}
	if (ioctl(vcpu, KVM_SET_CPUID2, c)) {
		vcpu_fail(ST_SKIP, "KVM_SET_CPUID2", errno);
		goto out;
	}
	ret = 0;
out:
	free(c);
	return ret;
}

static uint64_t get_guest_aux(int vcpu)
{
	struct {
		struct kvm_msrs h;
		struct kvm_msr_entry ent;
	} m = { .h.nmsrs = 1, .ent.index = MSR_TSC_AUX };

	return ioctl(vcpu, KVM_GET_MSRS, &m) == 1 ? m.ent.data : ~0ull;
}

/*
 * Set up the VM here, after the fork (a VM belongs to its creator's mm),
 * and run it until the owner says stop.  Failures before the guest's
 * first OUT mean KVM cannot run it here: ST_SKIP.
 */
static void vcpu_main(void)
{
	struct kvm_userspace_memory_region mr;
	struct kvm_sregs sregs;
	struct kvm_regs regs;
	struct kvm_run *run;
	int kvm, vm, vcpu, sz, v;
	uint32_t last_mismatches = 0;
	uint8_t *mem, *io;

	sh->host_aux = rdtscp_aux();
	kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (kvm < 0)
		FAIL(ST_SKIP, "open /dev/kvm", errno);
	if (ioctl(kvm, KVM_GET_API_VERSION, 0) != KVM_API_VERSION)
		FAIL(ST_SKIP, "KVM API version", 0);
	vm = ioctl(kvm, KVM_CREATE_VM, 0);
	if (vm < 0)
		FAIL(ST_SKIP, "KVM_CREATE_VM", errno);
	sh->vm_fd = vm;
	mem = mmap(NULL, GUEST_MEM, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		FAIL(ST_ERROR, "mmap guest memory", errno);
	/* Every real-mode vector to a stub that reports it. */
	for (v = 0; v < 32; v++) {
		uint8_t *stub = mem + G_STUBS + 4 * v;

		stub[0] = 0xb0;			/* mov $v, %al */
		stub[1] = v;
		stub[2] = 0xe6;			/* out %al, $PORT_FAULT */
		stub[3] = PORT_FAULT;
		*(uint16_t *)(mem + 4 * v) = G_STUBS + 4 * v;
		*(uint16_t *)(mem + 4 * v + 2) = 0;
	}
	*(uint32_t *)(mem + G_FIRST_BAD) = ~0u;	/* none yet */
	*(uint32_t *)(mem + G_LAST_BAD) = ~0u;
	memcpy(mem + G_CODE, uli_kvm_guest, uli_kvm_guest_end - uli_kvm_guest);
	mr = (struct kvm_userspace_memory_region){
		.slot = 0, .guest_phys_addr = 0, .memory_size = GUEST_MEM,
		.userspace_addr = (uintptr_t)mem,
	};
	if (ioctl(vm, KVM_SET_USER_MEMORY_REGION, &mr))
		FAIL(ST_SKIP, "KVM_SET_USER_MEMORY_REGION", errno);
	vcpu = ioctl(vm, KVM_CREATE_VCPU, 0);
	if (vcpu < 0)
		FAIL(ST_SKIP, "KVM_CREATE_VCPU", errno);
	sz = ioctl(kvm, KVM_GET_VCPU_MMAP_SIZE, 0);
	if (sz < (int)sizeof(*run))
		FAIL(ST_SKIP, "KVM_GET_VCPU_MMAP_SIZE", errno);
	run = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_SHARED, vcpu, 0);
	if (run == MAP_FAILED)
		FAIL(ST_SKIP, "mmap kvm_run", errno);
	if (set_cpuid(kvm, vcpu))
		return;
	if (ioctl(vcpu, KVM_GET_SREGS, &sregs))
		FAIL(ST_SKIP, "KVM_GET_SREGS", errno);
	sregs.cs.base = 0;
	sregs.cs.selector = 0;
	sregs.ds.base = 0;
	sregs.ds.selector = 0;
	sregs.ss.base = 0;
	sregs.ss.selector = 0;
	if (ioctl(vcpu, KVM_SET_SREGS, &sregs))
		FAIL(ST_SKIP, "KVM_SET_SREGS", errno);
	memset(&regs, 0, sizeof(regs));
	regs.rip = G_CODE;
	regs.rsp = 0xfff0;
	regs.rflags = 2;
	if (ioctl(vcpu, KVM_SET_REGS, &regs))
		FAIL(ST_SKIP, "KVM_SET_REGS", errno);

	for (;;) {
		int fail = sh->state < ST_HELLO ? ST_SKIP : ST_ERROR;

		if (ioctl(vcpu, KVM_RUN, 0)) {
			if (errno == EINTR)
				continue;
			FAIL(fail, "KVM_RUN", errno);
		}
		if (run->exit_reason != KVM_EXIT_IO ||
		    run->io.direction != KVM_EXIT_IO_OUT) {
			snprintf(sh->msg, sizeof(sh->msg),
				 "KVM_RUN: exit reason %u, not an OUT", run->exit_reason);
			sh->state = fail;
			return;
		}
		io = (uint8_t *)run + run->io.data_offset;
		switch (run->io.port) {
		case PORT_HELLO:
			sh->state = ST_HELLO;
			break;
		case PORT_READY:
			sh->initial = *(uint32_t *)(mem + G_INITIAL);
			sh->state = ST_READY;
			break;
		case PORT_TICK:
			sh->mismatches = *(volatile uint32_t *)(mem + G_MISMATCH);
			sh->rounds = *(volatile uint32_t *)(mem + G_ROUNDS);
			sh->first_bad = *(volatile uint32_t *)(mem + G_FIRST_BAD);
			sh->last_bad = *(volatile uint32_t *)(mem + G_LAST_BAD);
			if (sh->mismatches != last_mismatches)
				sh->bad_ticks++;
			last_mismatches = sh->mismatches;
			if (sched_getcpu() != target)
				sh->cpu_moved = 1;
			sh->ticks++;
			if (sh->stop) {
				sh->kvm_aux = get_guest_aux(vcpu);
				sh->state = ST_DONE;
				return;
			}
			break;
		case PORT_FAULT:
			snprintf(sh->msg, sizeof(sh->msg), "the guest took exception %u", *io);
			sh->state = fail;
			return;
		default:
			sh->other_exits++;
			break;
		}
	}
}

/* --- The owner ----------------------------------------------------------- */

/*
 * KVM's count of exits for host interrupts that came in guest mode (the
 * VM's debugfs statistics, for the log), or -1.
 */
static long long irq_exits(pid_t pid)
{
	char path[96], buf[32];

	snprintf(path, sizeof(path), "/sys/kernel/debug/kvm/%d-%d/irq_exits", pid, sh->vm_fd);
	return t_read_file(path, buf, sizeof(buf)) > 0 ? atoll(buf) : -1;
}

/* Wait up to @ms for *v >= want, or for an error state. */
static bool wait_for(volatile uint64_t *v, uint64_t want, unsigned int ms)
{
	uint64_t t0 = t_now_ns();

	while (*v < want && sh->state >= 0 && t_ms_since(t0) < ms)
		usleep(1000);
	return *v >= want;
}

FIXTURE(uli) {};
FIXTURE_SETUP(uli) {}
FIXTURE_TEARDOWN(uli) {}

TEST_F_TIMEOUT(uli, vcpu_tsc_aux_across_upcalls, 600)
{
	uint64_t i, n = N_RAISES, t0, t1, ticks, control, rounds0, rounds1;
	long sw_before, sw_after;
	long long irq_before, irq_after;
	struct uli_stats st;
	pid_t child;
	void *uli;
	int mine;

	if (!t_upcall_mode())
		SKIP(return, "a property of the upcall (ULI_MODE=proc)");
	if (t_ncpus() < 2)
		SKIP(return, "needs 2 CPUs: the raiser would preempt the vCPU");
	if (!cpu_has_rdtscp())
		SKIP(return, "no RDTSCP");
	if (access("/dev/kvm", R_OK | W_OK))
		SKIP(return, "/dev/kvm: %s", strerror(errno));

	sh = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, sh);
	ASSERT_EQ(0, edu_open(&e, EDU_SLOT_C));
	uli = ULI_register_pci(e.bdf, handler, NULL, 0, NULL, 0, ULI_INTX);
	ASSERT_NE(NULL, uli) TH_LOG("ULI_register_pci: %s", strerror(errno));
	ASSERT_EQ(0, ULI_set_budget(uli, T_LONG_BUDGET));
	if (strcmp(ULI_mode(uli), "upcall"))
		SKIP(return, "a property of the upcall");
	target = t_irq_cpu(e.irq);
	ASSERT_GE(target, 0);
	mine = (target + 1) % t_ncpus();
	ASSERT_EQ(0, t_pin(mine));

	child = t_spawn(target, vcpu_main);
	ASSERT_GT(child, 0);
	/* After fork our pages are copy-on-write: write what the handler writes. */
	handled = saw_guest = saw_cpu = saw_other = 0;
	other_aux = 0;

	/* The guest running its loop (nested under TCG: slow to start). */
	t0 = t_now_ns();
	while (sh->state >= 0 && sh->state < ST_READY && t_ms_since(t0) < 60000)
		usleep(10000);
	if (sh->state == ST_SKIP) {
		t_stop(child);
		ULI_destroy(uli);
		edu_close(&e);
		SKIP(return, "KVM cannot run a minimal guest: %s", sh->msg);
	}
	ASSERT_EQ(ST_READY, sh->state) TH_LOG("vCPU: %s", sh->msg);
	ASSERT_EQ(GUEST_AUX, sh->initial) TH_LOG("the guest's TSC_AUX before any raise");
	/* What Linux keeps there (a user task on that CPU reads it). */
	host_aux = sh->host_aux;
	ASSERT_EQ((uint32_t)target, host_aux & 0xfff);
	/* Control: some rounds without upcalls, no mismatch. */
	ASSERT_TRUE(wait_for(&sh->ticks, 10, 60000)) TH_LOG("vCPU: %s", sh->msg);
	control = sh->mismatches;
	ASSERT_EQ(0, control) TH_LOG("mismatches without upcalls, last 0x%x", sh->last_bad);

	sw_before = t_ctxt_switches(child, 0);
	irq_before = irq_exits(child);
	rounds0 = sh->rounds;
	t0 = t_now_ns();
	for (i = 0; i < n && sh->state >= 0; i++) {
		edu_raise(&e, 1);
		if (!t_wait_count(&handled, i + 1, 10000))
			break;
	}
	rounds1 = sh->rounds;
	irq_after = irq_exits(child);
	/* Two more rounds: the last upcall's effect is counted. */
	ticks = sh->ticks;
	wait_for(&sh->ticks, ticks + 2, 30000);
	sw_after = t_ctxt_switches(child, 0);
	t1 = t_now_ns();
	sh->stop = 1;
	while (sh->state >= 0 && sh->state != ST_DONE && t_ms_since(t1) < 30000)
		usleep(1000);

	ASSERT_EQ(0, ULI_get_stats(uli, &st));
	TH_LOG("%llu ms, %llu raises: handled %llu (TSC_AUX: the host's 0x%x %llu, G %llu, other %llu, last other 0x%x)",
	       (unsigned long long)(t1 - t0) / 1000000, (unsigned long long)i,
	       (unsigned long long)handled, host_aux, (unsigned long long)saw_cpu,
	       (unsigned long long)saw_guest, (unsigned long long)saw_other, other_aux);
	TH_LOG("upcalls %llu: owner %llu other %llu idle %llu kernel %llu deferred %llu; vCPU ctxsw %ld, KVM irq exits %lld",
	       (unsigned long long)st.calls, (unsigned long long)st.ctx_owner,
	       (unsigned long long)st.ctx_other, (unsigned long long)st.ctx_idle,
	       (unsigned long long)st.ctx_kernel, (unsigned long long)st.deferred,
	       sw_after - sw_before,
	       irq_before >= 0 && irq_after >= 0 ? irq_after - irq_before : -1);
	TH_LOG("guest: %u rounds of 65536 RDTSCPs (%llu while raising), %llu exits; mismatches %u in %llu rounds (first 0x%x, last 0x%x); KVM's TSC_AUX 0x%llx, the host's 0x%x",
	       sh->rounds, (unsigned long long)(rounds1 - rounds0),
	       (unsigned long long)sh->ticks, sh->mismatches,
	       (unsigned long long)sh->bad_ticks, sh->first_bad, sh->last_bad,
	       (unsigned long long)sh->kvm_aux, sh->host_aux);
	EXPECT_EQ(ST_DONE, sh->state) TH_LOG("vCPU: %s", sh->msg);
	t_stop(child);

	/* Every raise handled, without an abort. */
	EXPECT_EQ(n, handled);
	EXPECT_EQ(n, st.calls);
	EXPECT_EQ(0, t_aborts(&st));
	/* The handler saw the host's TSC_AUX, its CPU's number, never G. */
	EXPECT_EQ(0, saw_guest);
	EXPECT_EQ(n, saw_cpu) TH_LOG("G %llu times, other values %llu times",
				     (unsigned long long)saw_guest,
				     (unsigned long long)saw_other);
	/* The guest saw G all along. */
	EXPECT_EQ(0, sh->mismatches) TH_LOG("the guest read TSC_AUX 0x%x after an upcall (the host's: 0x%x)",
					    sh->first_bad, sh->host_aux);
	EXPECT_EQ(GUEST_AUX, sh->kvm_aux);
	/*
	 * The upcalls borrowed the vCPU thread: it runs alone on the CPU
	 * (pinned, never sleeping, hardly switched out), and interrupts in
	 * guest mode reach the host in its kernel context.  Measured under
	 * TCG, 2 vCPUs, 1000-2000 raises: 96-99% "kernel", the rest "other"
	 * (the vCPU thread in user mode between two KVM_RUNs), no "idle".
	 * Nested under TCG most come while the host kernel emulates VMRUN
	 * and #VMEXIT or handles the exits; KVM's irq exits (in the log)
	 * count those that came in guest mode: 5-12% of them.
	 */
	EXPECT_EQ(0, sh->cpu_moved);
	EXPECT_EQ(0, st.ctx_owner);
	EXPECT_GE(st.ctx_kernel, n / 2);
	EXPECT_EQ(0, sh->other_exits);
	EXPECT_EQ(0, ULI_destroy(uli));
	edu_close(&e);
}

TEST_HARNESS_MAIN
