// SPDX-License-Identifier: MIT
/*
 * uli_isolation - the upcall borrows a foreign process's CPU without a
 * trace: that process, spinning with known values in its general and
 * vector registers, sees them intact after N_RAISES upcalls; the handler
 * never sees them; the handler's writes land in the owner's memory, not
 * in the foreign copy; and neither the owner's main thread (in pause())
 * nor the foreign process is switched out per upcall: no task is woken
 * or scheduled to run the handler.
 */
#include <pthread.h>
#include <sys/mman.h>

#include "kselftest_harness.h"
#include "helpers.h"

/* ULI_TEST_N overrides, for quick runs by hand. */
#define N_RAISES t_test_n(1)

static struct edu e;
static volatile uint64_t handled;
static volatile uint64_t owner_word;	/* written by the handler */

struct shared {
	volatile uint64_t iterations;
	volatile uint64_t bad;		/* 1 register, 2 memory */
};

/* Register patterns: 32-bit values, so cmp $imm checks them. */
#define P(n) "$0x5a5a00" #n

/* What the handler found in its registers on entry. */
static uint64_t seen_gpr[16];
static uint8_t seen_xmm[16][16] __attribute__((aligned(16)));
static volatile uint64_t leaks;

static void handler_body(void *arg)
{
	int i, j;

	(void)arg;
	for (i = 0; i < 16; i++)
		if ((seen_gpr[i] >> 8) == 0x5a5a00)
			leaks++;
	for (i = 0; i < 16; i++)
		for (j = 0; j < 16; j += 4)
			if (seen_xmm[i][j + 1] == 0x5a && seen_xmm[i][j + 2] == 0x5a)
				leaks++;
	edu_ack(&e, edu_status(&e));
	owner_word++;
	handled++;
}

/* Entered straight from the trampoline: record, then run the C body. */
__attribute__((naked)) static void handler(void *arg)
{
	__asm__ volatile (
		"movq %%rax, 0+%[g]\n\t movq %%rbx, 8+%[g]\n\t"
		"movq %%rcx, 16+%[g]\n\t movq %%rdx, 24+%[g]\n\t"
		"movq %%rsi, 32+%[g]\n\t movq %%rdi, 40+%[g]\n\t"
		"movq %%rbp, 48+%[g]\n\t movq %%r8, 56+%[g]\n\t"
		"movq %%r9, 64+%[g]\n\t movq %%r10, 72+%[g]\n\t"
		"movq %%r11, 80+%[g]\n\t movq %%r12, 88+%[g]\n\t"
		"movq %%r13, 96+%[g]\n\t movq %%r14, 104+%[g]\n\t"
		"movq %%r15, 112+%[g]\n\t"
		"movdqa %%xmm0, 0+%[x]\n\t movdqa %%xmm1, 16+%[x]\n\t"
		"movdqa %%xmm2, 32+%[x]\n\t movdqa %%xmm3, 48+%[x]\n\t"
		"movdqa %%xmm4, 64+%[x]\n\t movdqa %%xmm5, 80+%[x]\n\t"
		"movdqa %%xmm6, 96+%[x]\n\t movdqa %%xmm7, 112+%[x]\n\t"
		"movdqa %%xmm8, 128+%[x]\n\t movdqa %%xmm9, 144+%[x]\n\t"
		"movdqa %%xmm10, 160+%[x]\n\t movdqa %%xmm11, 176+%[x]\n\t"
		"movdqa %%xmm12, 192+%[x]\n\t movdqa %%xmm13, 208+%[x]\n\t"
		"movdqa %%xmm14, 224+%[x]\n\t movdqa %%xmm15, 240+%[x]\n\t"
		"jmp %P[body]\n\t"
		: : [g] "m" (seen_gpr), [x] "m" (seen_xmm), [body] "i" (handler_body));
}

static struct shared *sh;

/*
 * The foreign process: patterns in every general register but %r14 (the
 * shared page) and %r15 (scratch), and in %ymm0-%ymm14 (%xmm with SSE
 * only); checked in a loop, with its copy of owner_word.
 */
static void foreign(void)
{
	static const uint32_t pat[8] __attribute__((aligned(32))) = {
		0x5a5a0011, 0x5a5a0011, 0x5a5a0011, 0x5a5a0011,
		0x5a5a0011, 0x5a5a0011, 0x5a5a0011, 0x5a5a0011,
	};
	int avx = __builtin_cpu_supports("avx2");

	if (avx)
		__asm__ volatile (
		"movq %[sh], %%r14\n\t"
		"vmovdqa %[pat], %%ymm0\n\t vmovdqa %%ymm0, %%ymm1\n\t vmovdqa %%ymm0, %%ymm2\n\t"
		"vmovdqa %%ymm0, %%ymm3\n\t vmovdqa %%ymm0, %%ymm4\n\t vmovdqa %%ymm0, %%ymm5\n\t"
		"vmovdqa %%ymm0, %%ymm6\n\t vmovdqa %%ymm0, %%ymm7\n\t vmovdqa %%ymm0, %%ymm8\n\t"
		"vmovdqa %%ymm0, %%ymm9\n\t vmovdqa %%ymm0, %%ymm10\n\t vmovdqa %%ymm0, %%ymm11\n\t"
		"vmovdqa %%ymm0, %%ymm12\n\t vmovdqa %%ymm0, %%ymm13\n\t vmovdqa %%ymm0, %%ymm14\n\t"
		"movq " P(01) ", %%rax\n\t movq " P(02) ", %%rbx\n\t movq " P(03) ", %%rcx\n\t"
		"movq " P(04) ", %%rdx\n\t movq " P(05) ", %%rsi\n\t movq " P(06) ", %%rdi\n\t"
		"movq " P(07) ", %%rbp\n\t movq " P(08) ", %%r8\n\t movq " P(09) ", %%r9\n\t"
		"movq " P(10) ", %%r10\n\t movq " P(11) ", %%r11\n\t movq " P(12) ", %%r12\n\t"
		"movq " P(13) ", %%r13\n\t"
		"1:\n\t"
		"cmpq " P(01) ", %%rax\n\t jne 8f\n\t cmpq " P(02) ", %%rbx\n\t jne 8f\n\t"
		"cmpq " P(03) ", %%rcx\n\t jne 8f\n\t cmpq " P(04) ", %%rdx\n\t jne 8f\n\t"
		"cmpq " P(05) ", %%rsi\n\t jne 8f\n\t cmpq " P(06) ", %%rdi\n\t jne 8f\n\t"
		"cmpq " P(07) ", %%rbp\n\t jne 8f\n\t cmpq " P(08) ", %%r8\n\t jne 8f\n\t"
		"cmpq " P(09) ", %%r9\n\t jne 8f\n\t cmpq " P(10) ", %%r10\n\t jne 8f\n\t"
		"cmpq " P(11) ", %%r11\n\t jne 8f\n\t cmpq " P(12) ", %%r12\n\t jne 8f\n\t"
		"cmpq " P(13) ", %%r13\n\t jne 8f\n\t"
		".irp r, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14\n\t"
		"vpcmpeqd %[pat], %%ymm\\r, %%ymm15\n\t vpmovmskb %%ymm15, %%r15d\n\t"
		"cmpl $-1, %%r15d\n\t jne 8f\n\t"
		".endr\n\t"
		"cmpq $0, %[ow]\n\t jne 9f\n\t"
		"incq 0(%%r14)\n\t jmp 1b\n\t"
		"8: movq $1, 8(%%r14)\n\t jmp 7f\n\t"
		"9: movq $2, 8(%%r14)\n\t"
		"7: jmp 7b\n\t"
		: : [sh] "r" (sh), [pat] "m" (pat), [ow] "m" (owner_word)
		: "memory");
	else
		__asm__ volatile (
		"movq %[sh], %%r14\n\t"
		"movdqa %[pat], %%xmm0\n\t"
		".irp r, 1,2,3,4,5,6,7,8,9,10,11,12,13,14\n\t movdqa %%xmm0, %%xmm\\r\n\t .endr\n\t"
		"movq " P(01) ", %%rax\n\t movq " P(02) ", %%rbx\n\t movq " P(13) ", %%r13\n\t"
		"1:\n\t"
		"cmpq " P(01) ", %%rax\n\t jne 8f\n\t cmpq " P(02) ", %%rbx\n\t jne 8f\n\t"
		"cmpq " P(13) ", %%r13\n\t jne 8f\n\t"
		".irp r, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14\n\t"
		"movdqa %%xmm\\r, %%xmm15\n\t pcmpeqd %[pat], %%xmm15\n\t pmovmskb %%xmm15, %%r15d\n\t"
		"cmpl $0xffff, %%r15d\n\t jne 8f\n\t"
		".endr\n\t"
		"cmpq $0, %[ow]\n\t jne 9f\n\t"
		"incq 0(%%r14)\n\t jmp 1b\n\t"
		"8: movq $1, 8(%%r14)\n\t jmp 7f\n\t"
		"9: movq $2, 8(%%r14)\n\t"
		"7: jmp 7b\n\t"
		: : [sh] "r" (sh), [pat] "m" (pat), [ow] "m" (owner_word)
		: "memory");
}

static volatile int raise_done;
static pid_t main_tid;

static void *raiser(void *arg)
{
	uint64_t i;

	t_pin((int)(long)arg);
	for (i = 0; i < N_RAISES; i++) {
		edu_raise(&e, 1);
		if (!t_wait_count(&handled, i + 1, 2000))
			break;
	}
	raise_done = 1;
	kill(getpid(), SIGUSR1);	/* ends main's pause() */
	return NULL;
}

static void on_usr1(int sig)
{
	(void)sig;
}

FIXTURE(uli) {};
FIXTURE_SETUP(uli) {}
FIXTURE_TEARDOWN(uli) {}

TEST_F_TIMEOUT(uli, foreign_process_untouched, 600)
{
	long main_before, main_after, child_before, child_after;
	struct uli_stats st;
	uint64_t iters;
	pthread_t thr;
	pid_t child;
	int target;
	void *uli;

	if (t_ncpus() < 2)
		SKIP(return, "needs 2 CPUs: one for the foreign process alone");
	sh = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, sh);
	ASSERT_EQ(0, edu_open(&e, EDU_SLOT_C));
	uli = ULI_register_pci(e.bdf, handler, NULL, 0, NULL, 0, ULI_INTX);
	ASSERT_NE(NULL, uli) TH_LOG("ULI_register_pci: %s", strerror(errno));
	ASSERT_EQ(0, ULI_set_budget(uli, T_LONG_BUDGET));
	if (strcmp(ULI_mode(uli), "upcall"))
		SKIP(return, "isolation is a property of the upcall");

	target = t_irq_cpu(e.irq);
	child = t_spawn(target, foreign);
	/* After fork our pages are copy-on-write: write what the handler writes. */
	owner_word = 0;
	handled = 0;
	leaks = 0;
	memset(seen_gpr, 0, sizeof(seen_gpr));
	memset(seen_xmm, 0, sizeof(seen_xmm));
	/* Running its loop (a loaded TCG host may take a while to start it). */
	for (int ms = 0; !sh->iterations && ms < 10000; ms += 10)
		usleep(10000);
	ASSERT_GT(sh->iterations, 0);

	signal(SIGUSR1, on_usr1);
	main_tid = gettid();
	main_before = t_ctxt_switches(getpid(), main_tid);
	child_before = t_ctxt_switches(child, 0);
	ASSERT_EQ(0, pthread_create(&thr, NULL, raiser, (void *)(long)((target + 1) % t_ncpus())));
	while (!raise_done)
		pause();
	main_after = t_ctxt_switches(getpid(), main_tid);
	child_after = t_ctxt_switches(child, 0);
	pthread_join(thr, NULL);
	iters = sh->iterations;
	usleep(20000);

	ASSERT_EQ(0, ULI_get_stats(uli, &st));
	TH_LOG("upcalls %llu: other %llu idle %llu kernel %llu owner %llu; main ctxsw %ld->%ld, foreign %ld->%ld",
	       (unsigned long long)st.calls, (unsigned long long)st.ctx_other,
	       (unsigned long long)st.ctx_idle, (unsigned long long)st.ctx_kernel,
	       (unsigned long long)st.ctx_owner,
	       main_before, main_after, child_before, child_after);
	EXPECT_EQ(N_RAISES, handled);
	EXPECT_EQ(N_RAISES, owner_word);
	/* Borrowed from the foreign process, in user mode or in its kernel. */
	EXPECT_EQ(N_RAISES, st.ctx_other + st.ctx_kernel);
	EXPECT_GE(st.ctx_other, N_RAISES / 2);
	EXPECT_EQ(0, sh->bad) TH_LOG("foreign process saw %s changed",
				     sh->bad == 1 ? "a register" : "its memory");
	EXPECT_GT(sh->iterations, iters);	/* still running its loop */
	EXPECT_EQ(0, leaks) TH_LOG("the handler saw the foreign registers");
	/*
	 * Nothing per upcall: the main thread wakes for the final SIGUSR1
	 * and, rarely, for unrelated reasons (1-4 seen over 100,000 upcalls;
	 * 21 over 20,000 on the debug kernel with threadirqs, on a host
	 * loaded with a second guest); a woken-thread delivery would add one
	 * per upcall, N_RAISES in all.
	 */
	EXPECT_LE(main_after - main_before, 10 + N_RAISES / 500);
	EXPECT_LE(child_after - child_before, 200);
	t_stop(child);
	EXPECT_EQ(0, ULI_destroy(uli));
	edu_close(&e);
}

TEST_HARNESS_MAIN
