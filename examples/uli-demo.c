// SPDX-License-Identifier: MIT
/*
 * uli-demo - the user-level interrupt handler, step by step, on QEMU's edu
 * device edu@5 (EDU_SLOT_C, an unshared line).  `make demo` runs it in the
 * guest, then examples/uli-demo.sh adds the latency table.
 *
 *  1. register a handler with ULI_register_pci() (INTx, direct upcall);
 *  2. raise interrupts from one CPU while the handler's CPU is idle, runs
 *     another process, runs a thread of ours; the kernel's per-context
 *     counts (ULI_get_stats) say where each call landed;
 *  3. a handler that dereferences NULL: the call is aborted, we get
 *     SIGSEGV, the next interrupt is served, the kernel log stays clean;
 *  4. the same handler delivered through /proc/irq/N/irq (ULI_MODE=proc),
 *     then a reader on uio_pci_generic, the mainline way.
 *
 * Each step checks what it shows; the exit status is 0 only if all pass.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/klog.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"

#define BATCH		1000	/* raises per context batch */
#define SMALL_BATCH	200	/* raises through /proc and UIO */

static struct edu e;
static int irq_cpu, raise_cpu;
static int failures;

/* --- What the handler touches: static data only (pinned by libuli) ----- */

static volatile uint64_t handled;	/* calls that ran to the end */
static volatile int crash;		/* the next call dereferences NULL */
static int *volatile null_ptr;		/* NULL, unknown to the compiler */

static void handler(void *arg)
{
	(void)arg;
	edu_ack(&e, edu_status(&e));	/* first: quiet the device */
	if (crash)
		*(volatile int *)null_ptr = 1;
	handled++;
}

/* --- Helpers ------------------------------------------------------------ */

static void __attribute__((format(printf, 1, 2))) fail(const char *fmt, ...)
{
	va_list ap;

	printf("   FAIL: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	failures++;
}

/* Raise n interrupts one at a time, each served before the next. */
static bool raise_batch(unsigned int n)
{
	uint64_t base = handled;
	unsigned int i;

	for (i = 0; i < n; i++) {
		edu_raise(&e, 1);
		if (!t_wait_count(&handled, base + i + 1, 2000)) {
			fail("raise %u of %u: no handler call within 2 s", i + 1, n);
			return false;
		}
	}
	return true;
}

/* --- Step 2: contexts ---------------------------------------------------- */

static volatile int owner_stop;

static void *owner_spin(void *arg)
{
	(void)arg;
	t_pin(irq_cpu);
	while (!owner_stop)
		__asm__ volatile ("" ::: "memory");
	return NULL;
}

static void spin_forever(void)
{
	for (;;)
		__asm__ volatile ("" ::: "memory");
}

enum ctx { IDLE, OTHER, OWNER };

static const char *const ctx_label[] = {
	[IDLE]  = "CPU %d idle",
	[OTHER] = "another process spins on CPU %d",
	[OWNER] = "a thread of uli-demo spins on CPU %d",
};
static const char *const ctx_name[] = { "idle", "other", "owner" };

static void contexts_batch(void *uli, enum ctx c)
{
	struct uli_stats a, b;
	uint64_t d[4], got;
	pthread_t th;
	pid_t child = 0;
	char label[64];
	bool ok;

	if (c == OTHER) {
		child = t_spawn(irq_cpu, spin_forever);	/* another process */
		if (child < 0) {
			fail("fork: %s", strerror(errno));
			return;
		}
	} else if (c == OWNER) {
		owner_stop = 0;
		if (pthread_create(&th, NULL, owner_spin, NULL)) {
			fail("pthread_create");
			return;
		}
	}
	usleep(100000);		/* let the spinner take the CPU */

	ULI_get_stats(uli, &a);
	ok = raise_batch(BATCH);
	ULI_get_stats(uli, &b);

	if (c == OTHER) {
		t_stop(child);
	} else if (c == OWNER) {
		owner_stop = 1;
		pthread_join(th, NULL);
	}
	if (!ok)
		return;

	d[IDLE] = b.ctx_idle - a.ctx_idle;
	d[OTHER] = b.ctx_other - a.ctx_other;
	d[OWNER] = b.ctx_owner - a.ctx_owner;
	d[3] = b.ctx_kernel - a.ctx_kernel;
	got = d[c];
	snprintf(label, sizeof(label), ctx_label[c], irq_cpu);
	printf("   %-37s calls %4llu: idle %4llu  other %4llu  owner %4llu  kernel %3llu  %s\n",
	       label, (unsigned long long)(b.calls - a.calls),
	       (unsigned long long)d[IDLE], (unsigned long long)d[OTHER],
	       (unsigned long long)d[OWNER], (unsigned long long)d[3],
	       got * 2 > BATCH ? "ok" : "FAIL");
	if (b.calls - a.calls != BATCH)
		fail("%llu calls for %d raises", (unsigned long long)(b.calls - a.calls), BATCH);
	if (got * 2 <= BATCH)
		fail("only %llu of %d calls interrupted the %s context",
		     (unsigned long long)got, BATCH, ctx_name[c]);
}

/* --- Step 3: a faulting handler ------------------------------------------ */

static volatile sig_atomic_t segv_count, segv_code;

static void on_segv(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	/* A fault of our own code (not the kernel's report): die as usual. */
	if (si->si_code > 0 && si->si_code != SI_KERNEL) {
		signal(SIGSEGV, SIG_DFL);
		return;
	}
	segv_code = si->si_code;
	segv_count++;
}

/* Lines of the kernel log that a clean run never has. */
static int kernel_log_bad(void)
{
	static const char *const bad[] = {
		"BUG:", "WARNING:", "Oops", "Call Trace:", "general protection fault",
		"nobody cared", "Kernel panic",
	};
	int size = klogctl(10, NULL, 0), n, count = 0;	/* SYSLOG_ACTION_SIZE_BUFFER */
	char *buf, *line, *save = NULL;
	unsigned int i;

	if (size <= 0)
		return -1;
	buf = malloc((size_t)size + 1);
	if (!buf)
		return -1;
	n = klogctl(3, buf, size);			/* SYSLOG_ACTION_READ_ALL */
	if (n < 0) {
		free(buf);
		return -1;
	}
	buf[n] = 0;
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
			if (strstr(line, bad[i])) {
				printf("   kernel log: %s\n", line);
				count++;
				break;
			}
	free(buf);
	return count;
}

static void fault_step(void *uli)
{
	struct sigaction sa = { .sa_sigaction = on_segv, .sa_flags = SA_SIGINFO };
	struct uli_stats a, b;
	uint64_t end, before;
	int bad;

	sigemptyset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, NULL);
	ULI_get_stats(uli, &a);
	before = handled;
	segv_count = 0;

	crash = 1;
	edu_raise(&e, 1);
	end = t_now_ns() + 2000000000ull;
	while (!segv_count && t_now_ns() < end)
		;
	crash = 0;
	ULI_get_stats(uli, &b);
	printf("   raise, the handler dereferences NULL: the call did not complete (%llu completed),\n"
	       "   aborted_fault %llu; %s (si_code %s)\n",
	       (unsigned long long)(handled - before),
	       (unsigned long long)(b.aborted_fault - a.aborted_fault),
	       segv_count ? "SIGSEGV caught by our sigaction handler" : "no SIGSEGV",
	       segv_code == SI_KERNEL ? "SI_KERNEL: from the kernel" : "not the kernel's");
	if (segv_count != 1)
		fail("%d SIGSEGV for one aborted call", (int)segv_count);
	if (handled != before)
		fail("the faulting call completed");
	if (b.aborted_fault - a.aborted_fault != 1)
		fail("aborted_fault went up by %llu, not 1",
		     (unsigned long long)(b.aborted_fault - a.aborted_fault));

	before = handled;
	edu_raise(&e, 1);
	if (!t_wait_count(&handled, before + 1, 2000)) {
		fail("the next interrupt was not served");
		return;
	}
	ULI_get_stats(uli, &b);
	printf("   raise again, no NULL this time: served normally (%llu completed; over both\n"
	       "   raises, calls %llu, aborted_fault %llu)\n",
	       (unsigned long long)(handled - before), (unsigned long long)(b.calls - a.calls),
	       (unsigned long long)(b.aborted_fault - a.aborted_fault));
	if (b.calls - a.calls != 2)
		fail("%llu calls for two raises", (unsigned long long)(b.calls - a.calls));

	bad = kernel_log_bad();
	if (bad)
		fail("the kernel log has %d BUG/WARNING/Oops line(s)", bad);
	else
		printf("   kernel log (dmesg): no BUG, WARNING, Oops or call trace\n");
	signal(SIGSEGV, SIG_DFL);
}

/* --- Step 4: /proc and UIO ------------------------------------------------ */

static void proc_step(void)
{
	struct uli_stats st;
	const char *mode;
	void *uli;

	/* libuli's reader thread inherits our affinity: the IRQ's CPU. */
	t_pin(irq_cpu);
	setenv("ULI_MODE", "proc", 1);
	uli = ULI_register_pci(e.bdf, handler, NULL, 0, NULL, 0, ULI_INTX);
	unsetenv("ULI_MODE");
	t_pin(raise_cpu);
	if (!uli) {
		fail("ULI_register_pci with ULI_MODE=proc: %s", strerror(errno));
		return;
	}
	mode = ULI_mode(uli);
	printf("   ULI_MODE=proc, same ULI_register_pci() call: ULI_mode() says \"%s\"; a SCHED_FIFO thread\n"
	       "   of libuli blocks in read() on /proc/irq/%d/irq and calls the handler\n",
	       mode, ULI_irq(uli));
	if (strcmp(mode, "proc"))
		fail("ULI_mode() is %s, not proc", mode);
	if (raise_batch(SMALL_BATCH) && !ULI_get_stats(uli, &st)) {
		printf("   %d raises: calls %llu, interrupts %llu\n", SMALL_BATCH,
		       (unsigned long long)st.calls, (unsigned long long)st.interrupts);
		if (st.calls != SMALL_BATCH)
			fail("%llu calls for %d raises", (unsigned long long)st.calls, SMALL_BATCH);
	}
	if (ULI_destroy(uli))
		fail("ULI_destroy: %s", strerror(errno));
}

static void uio_step(void)
{
	char path[128];
	int32_t count, first = -1, prev = -1;
	int fd, idx, ret, i, reads = 0, jumps = 0;

	ret = edu_bind(&e, "uio_pci_generic");
	if (ret) {
		fail("bind uio_pci_generic: %s", strerror(-ret));
		return;
	}
	idx = edu_uio_index(&e);
	snprintf(path, sizeof(path), "/dev/uio%d", idx);
	fd = idx < 0 ? -1 : open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		fail("%s: %s", path, strerror(idx < 0 ? -idx : errno));
		goto unbind;
	}
	printf("   uio_pci_generic bound to %s (driver_override): read() of %s per interrupt;\n"
	       "   its kernel handler masks the device (DisINTx), so INTx is re-enabled through sysfs after each\n",
	       e.bdf, path);
	edu_set_intx(&e, true);
	for (i = 0; i < SMALL_BATCH; i++) {
		edu_raise(&e, 1);
		if (read(fd, &count, sizeof(count)) != sizeof(count)) {
			fail("read %s: %s", path, strerror(errno));
			break;
		}
		reads++;
		if (first < 0)
			first = count;
		else if (count != prev + 1)
			jumps++;
		prev = count;
		edu_ack(&e, edu_status(&e));
		edu_set_intx(&e, true);
	}
	close(fd);
	printf("   %d raises: %d reads, interrupt count %d..%d\n", SMALL_BATCH, reads, (int)first, (int)prev);
	if (reads == SMALL_BATCH && (jumps || prev - first != SMALL_BATCH - 1))
		fail("the UIO count moved by %d for %d interrupts", prev - first + 1, SMALL_BATCH);
unbind:
	ret = edu_bind(&e, NULL);
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/driver", e.bdf);
	if (ret || !access(path, F_OK))
		fail("unbind uio_pci_generic: %s", ret ? strerror(-ret) : "still bound");
	else
		printf("   uio_pci_generic unbound: %s has no driver again\n", e.bdf);
	edu_ack(&e, ~0u);
	edu_set_intx(&e, true);
}

/* --- Main ---------------------------------------------------------------- */

static void __attribute__((format(printf, 3, 4)))
step(int n, const char *title, const char *why, ...)
{
	va_list ap;

	printf("\n%d. %s\n   ", n, title);
	va_start(ap, why);
	vprintf(why, ap);
	va_end(ap);
	printf("\n");
}

int main(void)
{
	void *uli;
	int ret, ncpus;

	setvbuf(stdout, NULL, _IOLBF, 0);
	unsetenv("ULI_MODE");	/* steps 1-3 are about the upcall */
	printf("uli-demo: a user-level interrupt handler on QEMU's edu device, step by step\n");

	ncpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (ncpus < 2) {
		printf("uli-demo: needs 2 CPUs (SMP=2): one raises, the other takes the interrupts\n");
		return 1;
	}
	irq_cpu = ncpus - 1;
	raise_cpu = 0;
	ret = edu_open(&e, EDU_SLOT_C);
	if (ret) {
		printf("uli-demo: edu@%d: %s\n", EDU_SLOT_C, strerror(-ret));
		return 1;
	}
	edu_ack(&e, ~0u);
	ret = t_set_irq_cpu(e.irq, irq_cpu);
	if (!ret)
		ret = t_pin(raise_cpu);
	if (ret) {
		printf("uli-demo: IRQ %d to CPU %d: %s\n", e.irq, irq_cpu, strerror(-ret));
		return 1;
	}

	step(1, "Register a handler",
	     "An ordinary C function; the kernel's interrupt return path enters it in user mode.");
	uli = ULI_register_pci(e.bdf, handler, NULL, 0, NULL, 0, ULI_INTX);
	if (!uli) {
		fail("ULI_register_pci: %s", strerror(errno));
		return 1;
	}
	/*
	 * The default 10 ms budget runs on the guest's clock, which goes on
	 * while the host deschedules a vCPU: not this demo's subject.
	 */
	ULI_set_budget(uli, 1000000000ull);
	printf("   ULI_register_pci(\"%s\", handler, NULL, 0, NULL, 0, ULI_INTX): mode %s, IRQ %d\n",
	       e.bdf, ULI_mode(uli), ULI_irq(uli));
	printf("   the IRQ goes to CPU %d (/proc/irq/%d/smp_affinity_list); we raise from CPU %d\n",
	       irq_cpu, e.irq, raise_cpu);

	step(2, "Where the handler runs",
	     "Whatever CPU %d is doing when the interrupt comes, the handler runs there at once.",
	     irq_cpu);
	printf("   %d raises per row, one at a time; ULI_get_stats() counts what each upcall interrupted:\n",
	       BATCH);
	contexts_batch(uli, IDLE);
	contexts_batch(uli, OTHER);
	contexts_batch(uli, OWNER);

	step(3, "A handler that dereferences NULL",
	     "The kernel ends that call, resumes what it interrupted and sends the owner SIGSEGV.");
	fault_step(uli);
	if (ULI_destroy(uli))
		fail("ULI_destroy: %s", strerror(errno));
	edu_ack(&e, ~0u);

	step(4, "The same handler through /proc, and a reader on uio_pci_generic",
	     "The thread-waking methods the upcall is compared with below.");
	proc_step();
	uio_step();

	edu_close(&e);
	if (failures) {
		printf("\nuli-demo: %d check(s) FAILED\n", failures);
		return 1;
	}
	printf("\nuli-demo: steps 1-4 passed\n");
	return 0;
}
