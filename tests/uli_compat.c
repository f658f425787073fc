// SPDX-License-Identifier: MIT
/*
 * uli_compat - user-level interrupts on a kernel that runs 32-bit
 * programs (IA32 emulation).  A 32-bit process cannot own a registration:
 * every ioctl of /dev/uli answers it EOPNOTSUPP, and the kernel holds
 * nothing afterwards.  A 32-bit task that upcalls interrupt resumes as it
 * was: registers, selectors, its TLS through %gs, its system calls by
 * int $0x80 and through the vDSO.  A handler that reaches a 32-bit system
 * call entry (int $0x80; sysenter; syscall in the 32-bit code segment) is
 * ended like one that makes a forbidden system call (SIGSYS), or, where
 * the CPU has no such entry, like one that executes an invalid
 * instruction (SIGILL); the interrupted 32-bit task carries on.
 *
 * The 32-bit helpers are tests/compat/ (static, -m32), in /bin/compat in
 * the guest: ../compat next to this program's directory.  Exits 4 (skip)
 * when the kernel refuses to run them (ENOEXEC: no IA32 emulation).
 */
#include <cpuid.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <linux/uli.h>

#include "kselftest_harness.h"
#include "helpers.h"
#include "compat/compat.h"

/* ULI_TEST_N overrides (5,000 raises by default), for quick runs by hand. */
#define N_RAISES t_test_n(20)

/* x86-64 Linux's 32-bit user code segment, __USER32_CS. */
#define USER32_CS	0x23

static struct edu e;
static volatile uint64_t handled;

/* --- the 32-bit helpers ---------------------------------------------------- */

/* @name's path: ../compat/NAME from this program's directory. */
static void helper_path(const char *name, char *buf, size_t len)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	exe[n > 0 ? n : 0] = 0;
	snprintf(buf, len, "%s/../compat/%s", n > 0 ? dirname(exe) : ".", name);
}

/*
 * Start the program argv[0], pinned to @cpu (-1: anywhere), dying with
 * us, with no signal blocked; with @to and @from, its standard input and
 * output are pipes from and to us.  The pid, or -errno of the exec
 * (-ENOEXEC: the kernel runs no such program).
 */
static pid_t spawn(char *const argv[], int cpu, int *to, int *from)
{
	int err[2], in[2] = { -1, -1 }, out[2] = { -1, -1 }, e32 = 0;
	sigset_t none;
	pid_t pid;

	if (pipe2(err, O_CLOEXEC) || (to && pipe2(in, O_CLOEXEC)) ||
	    (from && pipe2(out, O_CLOEXEC)))
		return -errno;
	pid = fork();
	if (pid < 0) {
		e32 = errno;
		close(err[0]);
		close(err[1]);
		close(in[0]);
		close(in[1]);
		close(out[0]);
		close(out[1]);
		return -e32;
	}
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (cpu >= 0)
			t_pin(cpu);
		if (to)
			dup2(in[0], 0);
		if (from)
			dup2(out[1], 1);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		execv(argv[0], argv);
		e32 = errno;
		if (write(err[1], &e32, sizeof(e32)) < 0)
			_exit(126);
		_exit(127);
	}
	close(err[1]);
	close(in[0]);
	close(out[1]);
	if (read(err[0], &e32, sizeof(e32)) == sizeof(e32)) {
		waitpid(pid, NULL, 0);
		pid = -e32;
	}
	close(err[0]);
	if (pid < 0) {
		close(in[1]);
		close(out[0]);
		return pid;
	}
	if (to)
		*to = in[1];
	if (from)
		*from = out[0];
	return pid;
}

/* Does the kernel run hello32?  0, -errno of the exec, or -EPROTO. */
static int compat_runs(void)
{
	char path[PATH_MAX];
	char *argv[] = { path, NULL };
	int status;
	pid_t pid;

	helper_path("hello32", path, sizeof(path));
	pid = spawn(argv, -1, NULL, NULL);
	if (pid < 0)
		return pid;
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
		return -EPROTO;
	return 0;
}

/* spin32 on a CPU, reporting through a shared page. */
struct spinner {
	pid_t pid;
	struct compat_shared *sh;
};

/* 0 once spin32 runs its loop on @cpu, or -errno. */
static int spinner_start(struct spinner *s, int cpu)
{
	char path[PATH_MAX], fdarg[16];
	char *argv[] = { path, fdarg, NULL };
	int fd, ms;

	s->pid = 0;
	fd = memfd_create("spin32", 0);	/* no CLOEXEC: spin32 maps it */
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, 4096)) {
		close(fd);
		return -errno;
	}
	s->sh = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (s->sh == MAP_FAILED) {
		close(fd);
		return -errno;
	}
	helper_path("spin32", path, sizeof(path));
	snprintf(fdarg, sizeof(fdarg), "%d", fd);
	s->pid = spawn(argv, cpu, NULL, NULL);
	close(fd);
	if (s->pid < 0)
		return s->pid;
	/* Its first block done (a loaded TCG host may take a while). */
	for (ms = 0; !__atomic_load_n(&s->sh->blocks, __ATOMIC_ACQUIRE); ms += 10) {
		if (ms >= 10000 || waitpid(s->pid, NULL, WNOHANG))
			return -ETIMEDOUT;
		usleep(10000);
	}
	return 0;
}

/* Tell spin32 to stop: its wait status, or -ETIMEDOUT (then killed). */
static int spinner_stop(struct spinner *s)
{
	int status, ms;

	if (s->pid <= 0)
		return -ESRCH;
	__atomic_store_n(&s->sh->stop, 1, __ATOMIC_RELEASE);
	for (ms = 0; ms < 10000; ms += 10) {
		if (waitpid(s->pid, &status, WNOHANG) == s->pid) {
			s->pid = 0;
			return status;
		}
		usleep(10000);
	}
	t_stop(s->pid);
	s->pid = 0;
	return -ETIMEDOUT;
}

static const char *vdso_name(uint32_t v)
{
	switch (v) {
	case VDSO_SYSENTER:
		return "sysenter";
	case VDSO_SYSCALL:
		return "syscall";
	case VDSO_INT80:
		return "int $0x80";
	}
	return "none";
}

/*
 * The spinner ran its loop throughout and exited 0 after @status, with no
 * mismatch and with system calls of every kind made.
 */
static void spinner_check(struct __test_metadata *_metadata,
			  const struct spinner *s, int status)
{
	const struct compat_shared *sh = s->sh;

	TH_LOG("spin32: %u blocks; selectors cs %#x ds %#x es %#x fs %#x gs %#x ss %#x; calls: int $0x80 %u, vDSO (%s) %u, glibc %u",
	       sh->blocks, sh->sel[SEL_CS], sh->sel[SEL_DS], sh->sel[SEL_ES],
	       sh->sel[SEL_FS], sh->sel[SEL_GS], sh->sel[SEL_SS],
	       sh->n_int80, vdso_name(sh->vdso_entry), sh->n_vsys, sh->n_libc);
	EXPECT_EQ(32, sh->bits);
	EXPECT_EQ(USER32_CS, sh->sel[SEL_CS]);
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
		TH_LOG("spin32: wait status %#x (%s %d)", status,
		       WIFSIGNALED(status) ? "signal" : "exit",
		       WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
	EXPECT_EQ(0, sh->bad_gpr)
		TH_LOG("registers: eax %#x ebx %#x ecx %#x edx %#x esi %#x edi %#x ebp %#x",
		       sh->bad_regs[0], sh->bad_regs[1], sh->bad_regs[2], sh->bad_regs[3],
		       sh->bad_regs[4], sh->bad_regs[5], sh->bad_regs[6]);
	EXPECT_EQ(0, sh->bad_xmm);
	EXPECT_EQ(0, sh->bad_seg) TH_LOG("a selector read %#x", sh->bad_sel);
	EXPECT_EQ(0, sh->bad_tls) TH_LOG("the __thread word read %#x", sh->bad_val);
	EXPECT_EQ(0, sh->bad_int80) TH_LOG("int $0x80 getpid() gave %#x", sh->bad_val);
	EXPECT_EQ(0, sh->bad_vsys) TH_LOG("vDSO getppid() gave %#x", sh->bad_val);
	EXPECT_EQ(0, sh->bad_libc);
	EXPECT_LT(0, sh->n_int80);
	EXPECT_LT(0, sh->n_libc);
	if (sh->vsyscall) {
		EXPECT_LT(0, sh->n_vsys);
	} else {
		TH_LOG("no AT_SYSINFO (vdso32=0?): __kernel_vsyscall not called");
	}
}

static const char *cpu_vendor(void)
{
	static char v[13];
	unsigned int a, b, c, d;

	if (!__get_cpuid(0, &a, &b, &c, &d))
		return "unknown";
	memcpy(v, &b, 4);
	memcpy(v + 4, &d, 4);
	memcpy(v + 8, &c, 4);
	return v;
}

FIXTURE(uli) {};
FIXTURE_SETUP(uli) {}
FIXTURE_TEARDOWN(uli) {}

/* --- a 32-bit owner ------------------------------------------------------- */

#define STACK_SIZE	(64 * 1024)

static void raw_entry(void)
{
}

/*
 * uli32 opens /dev/uli and tries every ioctl, a valid ULI_IOC_REGISTER
 * first: each answers EOPNOTSUPP.  While it holds the file and after,
 * the kernel lists no registration and the line has no handler of ours;
 * the same registration from this 64-bit process is taken.
 */
TEST_F_TIMEOUT(uli, owner_refused_32bit, 120)
{
	char path[PATH_MAX], dom[16], bus[16], devfn[16], line[128], name[32];
	char *argv[] = { path, dom, bus, devfn, NULL };
	int to, from, status, ret, err, calls = 0, end = -1, bits = 0, ms;
	struct uli_register r;
	void *stack;
	pid_t pid;
	FILE *f;
	int fd;

	ASSERT_EQ(0, edu_open(&e, EDU_SLOT_C));
	ASSERT_EQ(0, t_registrations()) TH_LOG("/sys/kernel/debug/uli lists a registration before the test");
	helper_path("uli32", path, sizeof(path));
	snprintf(dom, sizeof(dom), "%u", e.domain);
	snprintf(bus, sizeof(bus), "%u", e.bus);
	snprintf(devfn, sizeof(devfn), "%u", e.devfn);
	pid = spawn(argv, -1, &to, &from);
	ASSERT_LT(0, pid) TH_LOG("exec %s: %s", path, strerror(-pid));
	f = fdopen(from, "r");
	ASSERT_NE(NULL, f);
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "bits %d", &bits) == 1)
			continue;
		if (sscanf(line, "open %d %d", &ret, &err) == 2) {
			EXPECT_LE(0, ret) TH_LOG("32-bit open(/dev/uli): %s", strerror(err));
			continue;
		}
		if (sscanf(line, "end %d", &end) == 1)
			break;
		ASSERT_EQ(3, sscanf(line, "%31s %d %d", name, &ret, &err)) TH_LOG("uli32 said: %s", line);
		calls++;
		EXPECT_EQ(-1, ret) TH_LOG("32-bit ULI_IOC_%s returned %d", name, ret);
		EXPECT_EQ(EOPNOTSUPP, err) TH_LOG("32-bit ULI_IOC_%s: %s, not EOPNOTSUPP",
						  name, strerror(err));
	}
	EXPECT_EQ(32, bits);
	EXPECT_EQ(11, calls);
	EXPECT_EQ(calls, end);

	/* The 32-bit process holds the file: nothing registered. */
	EXPECT_EQ(0, t_registrations());
	EXPECT_FALSE(t_irq_has_action(e.irq, "uli"));
	close(to);
	fclose(f);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
		TH_LOG("uli32: wait status %#x", status);
	EXPECT_EQ(0, t_registrations());
	EXPECT_FALSE(t_irq_has_action(e.irq, "uli"));

	/* PREEMPT_RT refuses 64-bit registrations too (uli_unsupported). */
	if (!t_uli_offered())
		return;
	/* The same registration from 64-bit code: taken, then ended by close. */
	stack = mmap(NULL, STACK_SIZE, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, stack);
	memset(stack, 0, STACK_SIZE);
	memset(&r, 0, sizeof(r));
	r.source = ULI_SOURCE_PCI_INTX;
	r.domain = e.domain;
	r.bus = e.bus;
	r.devfn = e.devfn;
	r.entry = (unsigned long)raw_entry;
	r.stack = (unsigned long)stack;
	r.stack_size = STACK_SIZE;
	r.nsemas = 1;
	fd = open("/dev/uli", O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, fd) TH_LOG("/dev/uli: %s", strerror(errno));
	EXPECT_EQ(0, ioctl(fd, ULI_IOC_REGISTER, &r)) TH_LOG("64-bit ULI_IOC_REGISTER: %s", strerror(errno));
	EXPECT_EQ(1, t_registrations());
	close(fd);
	for (ms = 0; t_registrations() && ms < 2000; ms += 10)
		usleep(10000);
	EXPECT_EQ(0, t_registrations());
	munmap(stack, STACK_SIZE);
	edu_close(&e);
}

/* --- a 32-bit task interrupted ---------------------------------------------- */

static volatile int change_selectors;

static void handler(void *arg)
{
	(void)arg;
	edu_ack(&e, edu_status(&e));
	/*
	 * Selectors of its own, as a handler may leave them: __USER_DS in
	 * %ds and %es, which is what the 32-bit task has there (the kernel
	 * gave the handler nulls, and finds nothing to reload), and in %gs,
	 * which is not (the task's TLS selector and base are gone).  The
	 * task must get its own back.
	 */
	if (change_selectors)
		__asm__ volatile ("movl %0, %%ds\n\t movl %0, %%es\n\t movl %0, %%gs"
				  : : "r" (0x2b) : "memory");
	handled++;
}

/* The signals of a handler's abort: blocked, to be seen rather than die of. */
static void block_abort_signals(sigset_t *set)
{
	static const int sigs[] = { SIGSYS, SIGILL, SIGSEGV, SIGBUS, SIGFPE, SIGTRAP, SIGXCPU };
	unsigned int i;

	sigemptyset(set);
	for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaddset(set, sigs[i]);
	sigprocmask(SIG_BLOCK, set, NULL);
}

static const char *signame(int sig)
{
	switch (sig) {
	case -1: return "none";
	case SIGSYS: return "SIGSYS";
	case SIGILL: return "SIGILL";
	case SIGSEGV: return "SIGSEGV";
	case SIGBUS: return "SIGBUS";
	case SIGFPE: return "SIGFPE";
	case SIGTRAP: return "SIGTRAP";
	case SIGXCPU: return "SIGXCPU";
	}
	return "?";
}

/*
 * spin32 on the CPU that takes edu's interrupt, this process on the other
 * one, raising it @n times, each handled before the next.  Every raise is
 * one call and none is ended by the kernel: the handler's ULI_IOC_RETURN
 * is its 64-bit call even when the upcall came in during one of the
 * task's 32-bit system calls; the owner gets no signal.  spin32 runs on
 * and sees nothing changed.  Under the upcall, every call borrowed its
 * CPU, most of them from its 32-bit code.
 */
static void interrupted(struct __test_metadata *_metadata, uint64_t n, bool selectors)
{
	struct uli_stats st;
	struct spinner sp = { 0 };
	uint64_t i, t0;
	uint32_t b0, blocks;
	int target, status, ret, sig, ms;
	siginfo_t si;
	sigset_t set;
	bool upcall;
	void *uli;

	if (t_ncpus() < 2)
		SKIP(return, "needs 2 CPUs: one for the 32-bit task alone");
	block_abort_signals(&set);
	ASSERT_EQ(0, edu_open(&e, EDU_SLOT_C));
	change_selectors = selectors;
	uli = ULI_register_pci(e.bdf, handler, NULL, 0, NULL, 0, ULI_INTX);
	ASSERT_NE(NULL, uli) TH_LOG("ULI_register_pci: %s", strerror(errno));
	upcall = !strcmp(ULI_mode(uli), "upcall");
	ASSERT_EQ(0, ULI_set_budget(uli, T_LONG_BUDGET));

	target = t_irq_cpu(e.irq);
	ASSERT_LE(0, target);
	ASSERT_EQ(0, t_pin((target + 1) % t_ncpus()));
	ret = spinner_start(&sp, target);
	ASSERT_EQ(0, ret) TH_LOG("spin32 on CPU %d: %s", target, strerror(-ret));
	/* After fork our pages are copy-on-write: write what the handler writes. */
	handled = 0;

	b0 = sp.sh->blocks;
	t0 = t_now_ns();
	for (i = 0; i < n; i++) {
		edu_raise(&e, 1);
		if (!t_wait_count(&handled, i + 1, 2000))
			break;
	}
	t0 = t_now_ns() - t0;
	ASSERT_EQ(0, ULI_get_stats(uli, &st));
	/* Still in its loop: two more blocks done since the first raise. */
	for (ms = 0; sp.sh->blocks < b0 + 2 && ms < 5000; ms += 10)
		usleep(10000);
	blocks = sp.sh->blocks - b0;
	status = spinner_stop(&sp);
	sig = sigtimedwait(&set, &si, &(struct timespec){ 0 });

	TH_LOG("%llu ms, %llu raises: calls %llu interrupts %llu owner %llu other %llu idle %llu kernel %llu deferred %llu; spin32 blocks %u",
	       (unsigned long long)t0 / 1000000, (unsigned long long)n,
	       (unsigned long long)st.calls, (unsigned long long)st.interrupts,
	       (unsigned long long)st.ctx_owner, (unsigned long long)st.ctx_other,
	       (unsigned long long)st.ctx_idle, (unsigned long long)st.ctx_kernel,
	       (unsigned long long)st.deferred, blocks);
	EXPECT_EQ(n, handled);
	EXPECT_EQ(n, st.calls);
	EXPECT_EQ(n, st.interrupts);
	EXPECT_EQ(0, t_aborts(&st))
		TH_LOG("handler calls aborted: syscall %llu illegal %llu fault %llu fpe %llu timeout %llu",
		       (unsigned long long)st.aborted_syscall, (unsigned long long)st.aborted_illegal,
		       (unsigned long long)st.aborted_fault, (unsigned long long)st.aborted_fpe,
		       (unsigned long long)st.aborted_timeout);
	EXPECT_EQ(-1, sig) TH_LOG("the owner got %s", signame(sig));
	EXPECT_EQ(0, edu_status(&e));
	EXPECT_LE(2, blocks);
	ASSERT_LE(0, status) TH_LOG("spin32 did not stop: %s", strerror(-status));
	spinner_check(_metadata, &sp, status);
	if (upcall) {
		/*
		 * Every upcall borrowed the 32-bit task's CPU, most of them
		 * from the task in user mode (32-bit code): the rest from its
		 * system calls and the kernel's own work there.
		 */
		EXPECT_EQ(n, st.ctx_other + st.ctx_kernel);
		EXPECT_GE(st.ctx_other, n / 2);
	}
	EXPECT_EQ(0, ULI_destroy(uli));
	edu_close(&e);
}

TEST_F_TIMEOUT(uli, interrupted_compat_task, 600)
{
	interrupted(_metadata, N_RAISES, false);
}

/* The same, with a handler that leaves other selectors in %ds, %es, %gs. */
TEST_F_TIMEOUT(uli, interrupted_compat_task_handler_selectors, 600)
{
	interrupted(_metadata, N_RAISES / 5 ? N_RAISES / 5 : 1, true);
}

/* --- a handler at the 32-bit system call entries ----------------------------- */

enum { GOOD, INT80, SYSENTER, COMPAT_SYSCALL };

static volatile int bad;
static volatile int came_back;	/* the instruction returned to the handler */
static uint8_t *code32;		/* 32-bit code, below 4 GiB, pinned */

/*
 * In code32: words its 32-bit code writes, before and after its syscall,
 * and the far pointer (offset, selector: m16:32) the handler jumps through.
 */
#define CODE32_REACHED	64
#define CODE32_RETURNED	68
#define CODE32_FARPTR	96

static void abort_handler(void *arg)
{
	long ret = 20;	/* i386 __NR_getpid */

	(void)arg;
	edu_ack(&e, edu_status(&e));	/* first, so the device is quiet */
	switch (bad) {
	case INT80:
		__asm__ volatile ("int $0x80" : "+a" (ret) : :
				  "r8", "r9", "r10", "r11", "memory", "cc");
		came_back = 1;
		break;
	case SYSENTER:
		__asm__ volatile ("sysenter" : "+a" (ret) : :
				  "rcx", "rdx", "r8", "r9", "r10", "r11", "memory", "cc");
		came_back = 1;
		break;
	case COMPAT_SYSCALL:
		/*
		 * Into the 32-bit code segment, at code32, by a far jump
		 * through memory.  Not a far return: QEMU's TCG (7.2) pops
		 * its frame with a supervisor access, which under SMAP is a
		 * page fault that the kernel takes for its own (an oops).
		 */
		__asm__ volatile ("ljmpl *(%[fp])"
				  : "+a" (ret)
				  : [fp] "r" (code32 + CODE32_FARPTR)
				  : "rcx", "rdx", "r8", "r9", "r10", "r11", "memory", "cc");
		came_back = 1;
		break;
	}
	handled++;
}

/* movl $1, %ss:@addr, in 32-bit code (%ss: the flat __USER_DS). */
static uint8_t *put_mark(uint8_t *q, uint8_t *addr)
{
	uint32_t a = (uint32_t)(uintptr_t)addr, one = 1;

	*q++ = 0x36;	/* %ss: */
	*q++ = 0xc7;	/* movl $imm32, disp32 */
	*q++ = 0x05;
	memcpy(q, &a, 4);
	memcpy(q + 4, &one, 4);
	return q + 8;
}

/*
 * code32: mark REACHED; syscall; then, only if that returned, mark
 * RETURNED and hlt (a #GP in user mode: SIGSEGV, which no CPU should give
 * here).
 */
static void write_code32(uint8_t *p)
{
	uint32_t ip = (uint32_t)(uintptr_t)p;
	uint16_t cs = USER32_CS;
	uint8_t *q = put_mark(p, p + CODE32_REACHED);

	memcpy(p + CODE32_FARPTR, &ip, 4);
	memcpy(p + CODE32_FARPTR + 4, &cs, 2);

	*q++ = 0x0f;	/* syscall */
	*q++ = 0x05;
	q = put_mark(q, p + CODE32_RETURNED);
	*q++ = 0xf4;	/* hlt */
	*q++ = 0xeb;	/* jmp . */
	*q++ = 0xfe;
}

static void clear_marks(uint8_t *p)
{
	memset(p + CODE32_REACHED, 0, 8);
}

/*
 * Three times: a raise whose handler does @mode, ended by the kernel with
 * one of the accepted signals (SIGSYS: a system call; @alt_sigill: or
 * SIGILL, #UD) and its counter, then a raise handled normally.  The
 * interrupted 32-bit task is not disturbed, and 100 more raises are
 * handled afterwards.
 */
static void run_abort(struct __test_metadata *_metadata, int mode, bool alt_sigill)
{
	struct timespec ts = { .tv_sec = 2 };
	struct spinner sp = { 0 };
	int got[3], target, i, status, ret, sig;
	uint64_t want_syscall, want_illegal;
	struct uli_stats st;
	siginfo_t si;
	sigset_t set;
	void *uli;

	block_abort_signals(&set);
	ASSERT_EQ(0, edu_open(&e, EDU_SLOT_C));
	code32 = NULL;
	if (mode == COMPAT_SYSCALL) {
		code32 = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
			      MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);
		ASSERT_NE(MAP_FAILED, code32);
		ASSERT_GT(1ull << 32, (uint64_t)(uintptr_t)code32 + 4096);
		write_code32(code32);
		ASSERT_EQ(0, mlock(code32, 4096)) TH_LOG("mlock: %s", strerror(errno));
	}
	uli = ULI_register_pci(e.bdf, abort_handler, NULL, 0, NULL, 0, ULI_INTX);
	ASSERT_NE(NULL, uli) TH_LOG("ULI_register_pci: %s", strerror(errno));
	if (strcmp(ULI_mode(uli), "upcall"))
		SKIP(return, "the 32-bit entries are reached by the upcall's handler");
	ASSERT_EQ(0, ULI_set_budget(uli, T_LONG_BUDGET));
	if (code32) {
		ASSERT_EQ(0, ULI_pin(uli, code32, 4096)) TH_LOG("ULI_pin: %s", strerror(errno));
		clear_marks(code32);	/* touched, after the pin too */
	}

	/* The interrupted task is a 32-bit one, when there is a CPU for it. */
	target = t_irq_cpu(e.irq);
	ASSERT_LE(0, target);
	if (t_ncpus() > 1) {
		ASSERT_EQ(0, t_pin((target + 1) % t_ncpus()));
		ret = spinner_start(&sp, target);
		ASSERT_EQ(0, ret) TH_LOG("spin32 on CPU %d: %s", target, strerror(-ret));
	}
	came_back = 0;

	for (i = 0; i < 3; i++) {
		handled = 0;
		if (code32)
			clear_marks(code32);
		bad = mode;
		edu_raise(&e, 1);
		got[i] = sigtimedwait(&set, &si, &ts);
		ASSERT_NE(-1, got[i]) TH_LOG("round %d: no signal in 2 s (handled %llu)",
					    i, (unsigned long long)handled);
		EXPECT_TRUE(got[i] == SIGSYS || (alt_sigill && got[i] == SIGILL))
			TH_LOG("round %d: %s (%d)", i, signame(got[i]), got[i]);
		EXPECT_EQ(got[0], got[i]);
		EXPECT_EQ(0, handled);
		EXPECT_EQ(0, came_back);
		if (code32) {
			/* The 32-bit code ran, and its syscall did not return. */
			EXPECT_EQ(1, code32[CODE32_REACHED]);
			EXPECT_EQ(0, code32[CODE32_RETURNED]);
		}

		/* The next interrupt is delivered, and returns. */
		bad = GOOD;
		edu_raise(&e, 1);
		ASSERT_TRUE(t_wait_count(&handled, 1, 2000));
		usleep(10000);
		sig = sigtimedwait(&set, &si, &(struct timespec){ 0 });
		EXPECT_EQ(-1, sig) TH_LOG("round %d: the normal call after it ended with %s",
					  i, signame(sig));
	}
	ASSERT_EQ(0, ULI_get_stats(uli, &st));
	TH_LOG("%s: %s; aborted: syscall %llu illegal %llu fault %llu fpe %llu timeout %llu; calls %llu",
	       cpu_vendor(), signame(got[0]), (unsigned long long)st.aborted_syscall,
	       (unsigned long long)st.aborted_illegal, (unsigned long long)st.aborted_fault,
	       (unsigned long long)st.aborted_fpe, (unsigned long long)st.aborted_timeout,
	       (unsigned long long)st.calls);
	want_syscall = got[0] == SIGSYS ? 3 : 0;
	want_illegal = got[0] == SIGILL ? 3 : 0;
	EXPECT_EQ(want_syscall, st.aborted_syscall);
	EXPECT_EQ(want_illegal, st.aborted_illegal);
	EXPECT_EQ(0, st.aborted_fault + st.aborted_fpe + st.aborted_timeout);
	EXPECT_EQ(6, st.calls);

	/* Nothing left behind: a hundred more, handled. */
	bad = GOOD;
	handled = 0;
	EXPECT_EQ(100, t_raise_each(&e, &handled, 100, 2000));
	EXPECT_EQ(-1, sigtimedwait(&set, &si, &(struct timespec){ 0 }));

	if (sp.pid) {
		uint32_t blocks = sp.sh->blocks;

		usleep(50000);
		EXPECT_LT(blocks, sp.sh->blocks);	/* still running */
		status = spinner_stop(&sp);
		ASSERT_LE(0, status) TH_LOG("spin32 did not stop: %s", strerror(-status));
		spinner_check(_metadata, &sp, status);
	}
	EXPECT_EQ(0, ULI_destroy(uli));
	if (code32)
		munmap(code32, 4096);
	edu_close(&e);
}

/* int $0x80 from the handler: i386 getpid(), refused like a 64-bit call. */
TEST_F_TIMEOUT(uli, handler_int80, 600)
{
	run_abort(_metadata, INT80, false);
}

/*
 * sysenter from the handler's 64-bit code: #UD on AMD (SIGILL), the
 * kernel's 32-bit SYSENTER entry on Intel (SIGSYS).
 */
TEST_F_TIMEOUT(uli, handler_sysenter, 600)
{
	run_abort(_metadata, SYSENTER, true);
}

/*
 * syscall in the 32-bit code segment: the kernel's compat SYSCALL entry
 * on AMD (SIGSYS), #UD on Intel (SIGILL).
 */
TEST_F_TIMEOUT(uli, handler_compat_mode_syscall, 600)
{
	run_abort(_metadata, COMPAT_SYSCALL, true);
}

int main(int argc, char **argv)
{
	char path[PATH_MAX];
	int ret = compat_runs();

	if (ret == -ENOEXEC) {
		helper_path("hello32", path, sizeof(path));
		ksft_exit_skip("the kernel runs no 32-bit programs (exec %s: %s): no IA32 emulation\n",
			       path, strerror(-ret));
	}
	if (ret)
		ksft_print_msg("hello32: %s; the tests will say more\n", strerror(-ret));
	return test_harness_run(argc, argv);
}
