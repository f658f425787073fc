// SPDX-License-Identifier: MIT
/*
 * uli-bench - interrupt latency of the user-space handling methods, measured
 * in the guest on one QEMU edu device (edu@5, EDU_SLOT_C, an unshared line).
 *
 * Methods (each registered on the device in turn, torn down before the next):
 *   upcall      ULI direct upcall (libuli, default mode)
 *   upcall-msi  the same through the device's MSI: no masking, so no PCI
 *               config access in the hard handler or after the handler
 *   upcall-mmio the same, the device described by its status and ack
 *               registers (ULI_register_mmio()): the kernel acknowledges
 *               it, no masking, no PCI config access
 *   proc-read   the same handler run by libuli's SCHED_FIFO thread blocked
 *               in read() on /proc/irq/N/irq (ULI_MODE=proc)
 *   proc-msi    proc-read through the device's MSI, which the kernel
 *               allocates for the /proc file (IRQ_USER_DEV_PCI_MSI): the
 *               like-for-like peer of upcall-msi
 *   proc-mmio   proc-read with the description of upcall-mmio: its
 *               like-for-like peer
 *   proc-epoll  /proc/irq/N/irq with an INTx description, waited on with
 *               epoll_wait() by a SCHED_FIFO thread of ours, 16-byte read()
 *   uio-read    uio_pci_generic bound to the device, read() of /dev/uioN by
 *               a SCHED_FIFO thread, INTx re-enabled through sysfs config
 *   kernel      the floor: raise to the kernel's hard-handler entry, from
 *               the stamps of the upcall runs
 * The other methods use the device's PCI INTx masking in the kernel
 * (DisINTx).  The handler body
 * is the same for all: its acknowledgement finds nothing to do where the
 * kernel acknowledged.
 *
 * Scenarios: idle (nothing runs on the IRQ's CPU), foreign (a CPU-bound
 * process of another address space spins there), owner (a thread of this
 * process spins there), loaded (both CPUs busy with a mixed load: on each,
 * a CPU hog, a process streaming through 32 MiB, and a process in a loop
 * of system calls; latency only, no round trips; the raiser is SCHED_FIFO
 * there and sleeps while it waits, so that it neither waits behind the
 * load nor starves it).  The raiser is pinned to the other CPU; waiting
 * threads and spinners to the IRQ's CPU, whose affinity we set.
 *
 * Spans, from the TSC (same clock on all vCPUs):
 *   raise-to-handler    TSC just before the 0x60 write -> TSC at handler entry
 *   hardirq-to-handler  TSC the kernel's hard handler read on entry -> handler
 *                       entry (ULI_hardirq_cycles(), irq_user_event.cycles);
 *                       none for uio-read: its kernel side is mainline
 *   entry-to-handler    TSC at the x86 device-interrupt entry, the same point
 *                       for every method (the benchmark-only kernel option
 *                       X86_IRQ_ENTRY_STAMP, read from debugfs after each
 *                       sample) -> handler entry; NA without the option
 *   round-trip          the handler acknowledges and raises again, R times:
 *                       handler entry to next handler entry (the chain
 *                       stops at a time limit, -t, default 5 s)
 *   round-trip-xcpu     the same, but the raiser raises again as soon as it
 *                       sees the handler's sample
 * One latency sample: sleep a gap (default 100 us, so that the waiting side
 * is back asleep and the line unmasked), stamp, raise, spin until the
 * handler has stored its sample.  A sample whose hard-handler stamp is older
 * than its raise (a stale or re-delivered interrupt) is discarded, counted.
 *
 * Also measured in the same boot: the TSC frequency against CLOCK_MONOTONIC
 * (not assumed), a null system call (getppid) round trip, and the upcall's
 * own cost in the owner scenario: (kernel's upcall stamp, taken just before
 * it enters user mode, to handler entry) + (handler's last TSC to the
 * interrupted spinner's next TSC, the spinner recording the gaps of its
 * TSC loop).  The kernel has no stamp at the end of the hard handler; the
 * hard-handler-entry to upcall-stamp part is printed separately.
 *
 * Output, machine-readable (qemu/bench turns it into CSV, table and plot):
 *   TSC hz | NULL ... | ROW method scenario span samples min p50 p99 p99.9 max (ns)
 *   CDF method scenario span q ns
 *   RATE method scenario span n irq_per_s cycles_per_irq
 *   OWN method ... | STATS ... | INFO text
 * Exit status 0, or 1 when any cell failed.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/irq_user.h>
#include <linux/uli.h>

#include "helpers.h"

extern char **environ;

enum method {
	M_UPCALL, M_UPCALL_MSI, M_UPCALL_MMIO, M_PROC_READ, M_PROC_MSI,
	M_PROC_MMIO, M_PROC_EPOLL, M_UIO, NR_METHODS
};
enum scen { S_IDLE, S_FOREIGN, S_OWNER, S_LOADED, NR_SCENS };

static const char *const method_name[NR_METHODS] = {
	"upcall", "upcall-msi", "upcall-mmio", "proc-read", "proc-msi",
	"proc-mmio", "proc-epoll", "uio-read",
};
static const char *const scen_name[NR_SCENS] = {
	"idle", "foreign", "owner", "loaded",
};

/* Options */
static unsigned int opt_n = 10000;	/* samples per cell */
static unsigned int opt_warm = 1000;	/* warm-up raises per cell */
static unsigned int opt_rt = 10000;	/* round trips per cell */
static unsigned int opt_rt_s = 5;	/* time limit of a round-trip chain */
static unsigned int opt_gap_us = 100;
static unsigned int opt_sleepwait;	/* -S US: the raiser sleeps while waiting */
static unsigned int opt_cal_ms = 200;
static bool opt_cdf = true;
static unsigned int opt_share = ULI_DEFAULT_SHARE;	/* -x: ULI_set_share() */
static unsigned int opt_methods = (1u << NR_METHODS) - 1;
static unsigned int opt_scens = (1u << NR_SCENS) - 1;

static struct edu e;
static double tsc_hz;
static int irq_cpu, raise_cpu;
static int fifo_prio;
static enum scen cur_scen;
static int cur_irq;		/* the Linux IRQ of the method: line or MSI */

static void sleep_us(unsigned int us)
{
	struct timespec ts = { us / 1000000, (long)(us % 1000000) * 1000 };

	while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR)
		;
}

static double c2ns(double cycles)
{
	return cycles * 1e9 / tsc_hz;
}

/* --- The handler body, the same for every method ------------------------- */

struct sample {
	uint64_t raise;		/* raiser, before the 0x60 write */
	uint64_t irqentry;	/* kernel's x86 interrupt entry, 0 if unknown */
	uint64_t hw;		/* kernel hard-handler entry, 0 if unknown */
	uint64_t entry;		/* handler entry */
	uint64_t up;		/* kernel's upcall stamp (upcall only) */
	uint64_t exit;		/* handler's last TSC */
};

static struct {
	struct sample *s;
	unsigned int cap;
	_Atomic unsigned int n;		/* samples stored by the handler */
	_Atomic unsigned int armed;	/* uio: INTx re-enabled after n */
	unsigned int rt_left;		/* round trip: raises still to do */
	void *uli;
} C;

/* Record the entry TSC, acknowledge the device, store the sample. */
static inline void bench_body(uint64_t t, uint64_t hw)
{
	unsigned int i = atomic_load_explicit(&C.n, memory_order_relaxed);
	struct sample *s = &C.s[i < C.cap ? i : C.cap - 1];

	s->entry = t;
	s->hw = hw;
	s->up = C.uli ? ULI_upcall_cycles(C.uli) : 0;	/* 0 in proc mode */
	edu_ack(&e, 1);
	if (C.rt_left) {
		C.rt_left--;
		edu_raise(&e, 1);
	}
	s->exit = t_rdtsc();
	atomic_store_explicit(&C.n, i + 1, memory_order_release);
}

/* upcall and proc-read: called by libuli (no system call in here). */
static void uli_handler(void *arg)
{
	uint64_t t = t_rdtsc();

	(void)arg;
	bench_body(t, ULI_hardirq_cycles(C.uli));
}

/* --- Threads: proc-epoll and uio-read waiters, spinners ------------------ */

struct waiter {
	pthread_t th;
	bool started;
	int fd, ep, stopfd;
	int err;		/* errno of a failure in the thread */
};

static int start_thread(pthread_t *th, void *(*fn)(void *), void *arg,
			int cpu, bool fifo)
{
	struct sched_param sp = { .sched_priority = fifo_prio };
	pthread_attr_t attr;
	cpu_set_t set;
	int ret;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	pthread_attr_init(&attr);
	pthread_attr_setaffinity_np(&attr, sizeof(set), &set);
	if (fifo) {
		pthread_attr_setinheritsched(&attr, PTHREAD_EXPLICIT_SCHED);
		pthread_attr_setschedpolicy(&attr, SCHED_FIFO);
		pthread_attr_setschedparam(&attr, &sp);
	}
	ret = pthread_create(th, &attr, fn, arg);
	pthread_attr_destroy(&attr);
	return -ret;
}

static void *epoll_waiter(void *arg)
{
	struct waiter *w = arg;
	struct irq_user_event ev;
	struct epoll_event ee;
	int n;

	for (;;) {
		n = epoll_wait(w->ep, &ee, 1, -1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n != 1) {
			w->err = n < 0 ? errno : EPROTO;
			break;
		}
		if (ee.data.fd == w->stopfd)
			break;
		if (read(w->fd, &ev, sizeof(ev)) != sizeof(ev)) {
			w->err = errno;
			break;
		}
		bench_body(t_rdtsc(), ev.cycles);
	}
	return NULL;
}

static void *uio_waiter(void *arg)
{
	struct waiter *w = arg;
	int32_t count;
	ssize_t n;
	int ret;

	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
	for (;;) {
		pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
		n = read(w->fd, &count, sizeof(count));
		pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
		if (n != sizeof(count)) {
			if (n < 0 && errno == EINTR)
				continue;
			w->err = n < 0 ? errno : EIO;
			break;
		}
		bench_body(t_rdtsc(), 0);
		/* uio_pci_generic masked the device (DisINTx): 6.12 has no irqcontrol. */
		ret = edu_set_intx(&e, true);
		if (ret) {
			w->err = -ret;
			break;
		}
		atomic_store_explicit(&C.armed, atomic_load(&C.n), memory_order_release);
	}
	return NULL;
}

/* The owner scenario's spinner: records the gaps in its TSC loop. */
struct gap {
	uint64_t before, after;
};

#define GAP_MIN_CYCLES	1000
#define NR_GAPS		(1u << 18)

static struct {
	pthread_t th;
	bool started;
	atomic_int stop;
	atomic_int record;
	struct gap *g;
	_Atomic unsigned int n;
} spin;

static void *owner_spinner(void *arg)
{
	uint64_t prev = t_rdtsc(), t;
	unsigned int n;

	(void)arg;
	while (!atomic_load_explicit(&spin.stop, memory_order_relaxed)) {
		t = t_rdtsc();
		if (t - prev > GAP_MIN_CYCLES &&
		    atomic_load_explicit(&spin.record, memory_order_relaxed)) {
			n = atomic_load_explicit(&spin.n, memory_order_relaxed);
			if (n < NR_GAPS) {
				spin.g[n].before = prev;
				spin.g[n].after = t;
				atomic_store_explicit(&spin.n, n + 1, memory_order_release);
			}
		}
		prev = t;
	}
	return NULL;
}

/* The foreign scenario's spinner: this program, exec'ed, another mm. */
static int foreign_main(int cpu)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (t_pin(cpu))
		return 1;
	for (;;)
		__asm__ volatile ("" ::: "memory");
}

static pid_t foreign_pid;

/*
 * The loaded scenario's processes, all of this program exec'ed: on each
 * CPU a hog, a memory streamer and a system-call loop.  Under TCG there
 * is no cache model, so the streamer's cost is QEMU's software TLB; the
 * system calls are what an interrupt most often lands in.
 */
static const char *const load_kind[] = { "hog", "mem", "sys" };
#define NR_LOADS	(sizeof(load_kind) / sizeof(load_kind[0]))
static pid_t load_pid[2 * NR_LOADS];

static int load_main(const char *kind, int cpu)
{
	enum { MEM = 32 << 20 };
	volatile uint64_t x = 1;
	char buf[4096], *m;
	int zero, null;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (t_pin(cpu))
		return 1;
	if (!strcmp(kind, "mem")) {
		m = malloc(MEM);
		if (!m)
			return 1;
		memset(m, 1, MEM);
		for (;;) {
			memcpy(m, m + MEM / 2, MEM / 2);
			memcpy(m + MEM / 2, m, MEM / 2);
		}
	}
	if (!strcmp(kind, "sys")) {
		zero = open("/dev/zero", O_RDONLY);
		null = open("/dev/null", O_WRONLY);
		if (zero < 0 || null < 0)
			return 1;
		for (;;) {
			syscall(SYS_getppid);
			if (read(zero, buf, sizeof(buf)) < 0 ||
			    write(null, buf, sizeof(buf)) < 0)
				return 1;
		}
	}
	for (;;)
		x = x * 6364136223846793005ull + 1442695040888963407ull;
}

static void load_stop(void)
{
	unsigned int i;

	for (i = 0; i < 2 * NR_LOADS; i++) {
		if (load_pid[i] <= 0)
			continue;
		kill(load_pid[i], SIGKILL);
		waitpid(load_pid[i], NULL, 0);
		load_pid[i] = 0;
	}
}

static int load_start(void)
{
	char cpu[16], *argv[] = { "uli-bench", "--load", NULL, cpu, NULL };
	unsigned int i;
	int ret;

	for (i = 0; i < 2 * NR_LOADS; i++) {
		argv[2] = (char *)load_kind[i % NR_LOADS];
		snprintf(cpu, sizeof(cpu), "%d", i < NR_LOADS ? irq_cpu : raise_cpu);
		ret = posix_spawn(&load_pid[i], "/proc/self/exe", NULL, NULL, argv, environ);
		if (ret) {
			load_pid[i] = 0;
			load_stop();
			return -ret;
		}
	}
	return 0;
}

/*
 * The raiser's policy: SCHED_FIFO in the loaded scenario, so that what
 * is measured is the handling, not the raiser waiting behind the load.
 */
static int raiser_fifo(bool on)
{
	struct sched_param sp = { .sched_priority = on ? fifo_prio : 0 };

	return sched_setscheduler(0, on ? SCHED_FIFO : SCHED_OTHER, &sp) ? -errno : 0;
}

static int scenario_start(enum scen s)
{
	char cpu[16], *argv[] = { "uli-bench", "--spin", cpu, NULL };
	int ret;

	switch (s) {
	case S_IDLE:
		break;
	case S_FOREIGN:
		snprintf(cpu, sizeof(cpu), "%d", irq_cpu);
		ret = posix_spawn(&foreign_pid, "/proc/self/exe", NULL, NULL, argv, environ);
		if (ret) {
			foreign_pid = 0;
			return -ret;
		}
		break;
	case S_OWNER:
		atomic_store(&spin.stop, 0);
		atomic_store(&spin.record, 0);
		atomic_store(&spin.n, 0);
		ret = start_thread(&spin.th, owner_spinner, NULL, irq_cpu, false);
		if (ret)
			return ret;
		spin.started = true;
		break;
	case S_LOADED:
		ret = load_start();
		if (ret)
			return ret;
		ret = raiser_fifo(true);
		if (ret)
			return ret;
		break;
	default:
		break;
	}
	sleep_us(50000);	/* let the spinner take the CPU */
	return 0;
}

static void scenario_stop(void)
{
	if (foreign_pid > 0) {
		kill(foreign_pid, SIGKILL);
		waitpid(foreign_pid, NULL, 0);
		foreign_pid = 0;
	}
	if (spin.started) {
		atomic_store(&spin.stop, 1);
		pthread_join(spin.th, NULL);
		spin.started = false;
	}
	load_stop();
	raiser_fifo(false);
}

/* --- Registration of each method ---------------------------------------- */

static struct waiter W;
static bool uio_bound;

static bool wait_done(unsigned int want, bool uio, uint64_t timeout_ns);

static int check_irq_cpu(int irq)
{
	int cpu = t_irq_cpu(irq);

	if (cpu < 0)
		return cpu;
	if (cpu != irq_cpu) {
		printf("INFO error: irq %d is delivered to CPU %d, not %d\n", irq, cpu, irq_cpu);
		return -EXDEV;
	}
	return 0;
}

static int method_start(enum method m)
{
	struct epoll_event ee = { .events = EPOLLIN };
	struct irq_user_dev d;
	char path[64];
	int ret, idx, irq = e.irq;
	bool proc;

	memset(&W, 0, sizeof(W));
	W.fd = W.ep = W.stopfd = -1;
	C.uli = NULL;
	C.cap = opt_warm + opt_n;
	atomic_store(&C.n, 0);
	atomic_store(&C.armed, 0);
	/* Threads libuli creates inherit our affinity: the IRQ's CPU. */
	ret = t_pin(irq_cpu);
	if (ret)
		return ret;

	switch (m) {
	case M_UPCALL:
	case M_UPCALL_MSI:
	case M_UPCALL_MMIO:
	case M_PROC_READ:
	case M_PROC_MSI:
	case M_PROC_MMIO:
		proc = m == M_PROC_READ || m == M_PROC_MSI || m == M_PROC_MMIO;
		if (proc)
			setenv("ULI_MODE", "proc", 1);
		else
			unsetenv("ULI_MODE");
		if (m == M_UPCALL_MMIO || m == M_PROC_MMIO)
			C.uli = ULI_register_mmio(e.bdf, &edu_uli_regs, uli_handler, NULL,
						  0, NULL, 0);
		else
			C.uli = ULI_register_pci(e.bdf, uli_handler, NULL, 0, NULL, 0,
						 m == M_UPCALL_MSI || m == M_PROC_MSI ?
						 ULI_MSI : ULI_INTX);
		unsetenv("ULI_MODE");
		if (!C.uli)
			return -errno;
		if (strcmp(ULI_mode(C.uli), proc ? "proc" : "upcall"))
			return -EPROTO;
		if (m == M_UPCALL_MSI || m == M_PROC_MSI) {
			irq = t_msi_irq(&e);
			if (irq <= 0)
				return irq ? irq : -ENOENT;
			ret = t_set_irq_cpu(irq, irq_cpu);
			if (ret)
				return ret;
			/* An MSI moves at its next interrupt: have one. */
			edu_raise(&e, 1);
			if (!wait_done(1, false, 2000000000ull))
				return -ETIMEDOUT;
			atomic_store(&C.n, 0);
		}
		if (!proc) {
			/*
			 * Under ICOUNT the other vCPU's time slices count in the
			 * handler's run time: the 10 ms default budget would end
			 * it with SIGXCPU.  The handler itself takes microseconds.
			 */
			if (ULI_set_budget(C.uli, 1000000000ull))
				return -errno;
			if (opt_share != ULI_DEFAULT_SHARE && ULI_set_share(C.uli, opt_share))
				return -errno;
		}
		break;
	case M_PROC_EPOLL:
		snprintf(path, sizeof(path), "/proc/irq/%d/irq", e.irq);
		W.fd = open(path, O_RDONLY | O_CLOEXEC);
		if (W.fd < 0)
			return -errno;
		edu_describe_intx(&e, &d);
		if (ioctl(W.fd, IRQ_USER_SET_DEVICE, &d))
			return -errno;
		W.ep = epoll_create1(EPOLL_CLOEXEC);
		W.stopfd = eventfd(0, EFD_CLOEXEC);
		if (W.ep < 0 || W.stopfd < 0)
			return -errno;
		/* Level-triggered: each epoll_wait() polls, which re-arms. */
		ee.data.fd = W.fd;
		if (epoll_ctl(W.ep, EPOLL_CTL_ADD, W.fd, &ee))
			return -errno;
		ee.data.fd = W.stopfd;
		if (epoll_ctl(W.ep, EPOLL_CTL_ADD, W.stopfd, &ee))
			return -errno;
		ret = start_thread(&W.th, epoll_waiter, &W, irq_cpu, true);
		if (ret)
			return ret;
		W.started = true;
		break;
	case M_UIO:
		ret = edu_bind(&e, "uio_pci_generic");
		if (ret)
			return ret;
		uio_bound = true;
		idx = edu_uio_index(&e);
		if (idx < 0)
			return idx;
		snprintf(path, sizeof(path), "/dev/uio%d", idx);
		W.fd = open(path, O_RDONLY | O_CLOEXEC);
		if (W.fd < 0)
			return -errno;
		ret = edu_set_intx(&e, true);
		if (ret)
			return ret;
		ret = start_thread(&W.th, uio_waiter, &W, irq_cpu, true);
		if (ret)
			return ret;
		W.started = true;
		break;
	default:
		return -EINVAL;
	}
	ret = check_irq_cpu(irq);
	if (ret)
		return ret;
	cur_irq = irq;
	return t_pin(raise_cpu);
}

static void method_stats(enum method m, enum scen s)
{
	struct uli_stats st;

	if (!C.uli || ULI_get_stats(C.uli, &st))
		return;
	printf("STATS %s %s calls %llu interrupts %llu owner %llu other %llu idle %llu kernel %llu deferred %llu aborted %llu\n",
	       method_name[m], scen_name[s],
	       (unsigned long long)st.calls, (unsigned long long)st.interrupts,
	       (unsigned long long)st.ctx_owner, (unsigned long long)st.ctx_other,
	       (unsigned long long)st.ctx_idle, (unsigned long long)st.ctx_kernel,
	       (unsigned long long)st.deferred,
	       (unsigned long long)(st.aborted_fault + st.aborted_illegal + st.aborted_fpe +
				    st.aborted_syscall + st.aborted_timeout));
}

static int method_stop(void)
{
	uint64_t one = 1;
	int ret = 0;

	edu_ack(&e, ~0u);
	if (C.uli && ULI_destroy(C.uli))
		ret = -errno;
	C.uli = NULL;
	if (W.started) {
		if (W.stopfd >= 0) {
			if (write(W.stopfd, &one, sizeof(one)) != sizeof(one))
				ret = -errno;
		} else {
			pthread_cancel(W.th);
		}
		pthread_join(W.th, NULL);
		if (W.err)
			ret = -W.err;
	}
	if (W.ep >= 0)
		close(W.ep);
	if (W.stopfd >= 0)
		close(W.stopfd);
	if (W.fd >= 0)
		close(W.fd);
	memset(&W, 0, sizeof(W));
	if (uio_bound) {
		int r = edu_bind(&e, NULL);

		if (r && !ret)
			ret = r;
		uio_bound = false;
	}
	edu_ack(&e, ~0u);
	edu_set_intx(&e, true);
	return ret;
}

/* --- Statistics and output ---------------------------------------------- */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static uint64_t quantile(const uint64_t *v, size_t n, double q)
{
	return v[(size_t)(q * (double)(n - 1) + 0.5)];
}

/* Sorts v.  Prints ROW and, if wanted, CDF lines; returns the p50 in cycles. */
static uint64_t report(const char *m, const char *s, const char *span,
		       uint64_t *v, size_t n)
{
	static const double tail[] = { 0.999, 0.9999, 1.0 };
	unsigned int i;
	double t;

	if (!n) {
		printf("ROW %s %s %s 0 NA NA NA NA NA\n", m, s, span);
		return 0;
	}
	qsort(v, n, sizeof(*v), cmp_u64);
	printf("ROW %s %s %s %zu %.0f %.0f %.0f %.0f %.0f\n", m, s, span, n,
	       c2ns(v[0]), c2ns(quantile(v, n, 0.5)), c2ns(quantile(v, n, 0.99)),
	       c2ns(quantile(v, n, 0.999)), c2ns(v[n - 1]));
	if (opt_cdf && n >= 100) {
		for (i = 0; i <= 198; i++)
			printf("CDF %s %s %s %.4f %.0f\n", m, s, span, i * 0.005,
			       c2ns(quantile(v, n, i * 0.005)));
		for (i = 0; i < sizeof(tail) / sizeof(tail[0]); i++)
			printf("CDF %s %s %s %.4f %.0f\n", m, s, span, tail[i],
			       c2ns(quantile(v, n, tail[i])));
		/* The tail, 1 - q from 10^-0.1 to 10^-4, for the 1-CDF plot. */
		for (i = 1, t = 1; i <= 40; i++) {
			t *= 0.7943282347242815;	/* 10^-0.1 */
			printf("TAIL %s %s %s %.8f %.0f\n", m, s, span, t,
			       c2ns(quantile(v, n, 1 - t)));
		}
	}
	return quantile(v, n, 0.5);
}

/* The gap of the owner spinner that holds TSC t, or NULL. */
static const struct gap *find_gap(uint64_t t)
{
	unsigned int lo = 0, hi = atomic_load(&spin.n), mid;

	while (lo < hi) {
		mid = (lo + hi) / 2;
		if (spin.g[mid].after <= t)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < atomic_load(&spin.n) && spin.g[lo].before < t && t < spin.g[lo].after)
		return &spin.g[lo];
	return NULL;
}

static double null_syscall_ns, rdtsc_ns;

/* The upcall's own cost, owner scenario, from the samples and the gaps. */
static void own_cost(const char *m, const struct sample *s, unsigned int from, unsigned int to)
{
	char name[32];

	size_t n = to - from, k = 0, i;
	uint64_t *ent = calloc(n, sizeof(*ent)), *res = calloc(n, sizeof(*res));
	uint64_t *tot = calloc(n, sizeof(*tot)), *hw = calloc(n, sizeof(*hw));
	uint64_t *ub = calloc(n, sizeof(*ub));
	const struct gap *g;

	if (!ent || !res || !tot || !hw || !ub)
		goto out;
	for (i = from; i < to; i++) {
		if (!s[i].up || s[i].up < s[i].hw || s[i].up > s[i].entry)
			continue;
		g = find_gap(s[i].exit);
		if (!g || g->before > s[i].hw)
			continue;
		ent[k] = s[i].entry - s[i].up;
		res[k] = g->after - s[i].exit;
		tot[k] = ent[k] + res[k];
		hw[k] = s[i].up - s[i].hw;
		ub[k] = tot[k] + hw[k];
		k++;
	}
	printf("INFO own cost, %s: %zu of %zu owner-scenario upcalls interrupted the spinner (matched to its TSC gaps)\n",
	       m, k, n);
	if (!k)
		goto out;
	snprintf(name, sizeof(name), "%s-own", m);
	report(name, "owner", "upcall-to-handler", ent, k);
	report(name, "owner", "handler-to-resumed", res, k);
	report(name, "owner", "hardirq-to-upcall", hw, k);
	report(name, "owner", "own-total", tot, k);
	report(name, "owner", "own-total-with-hardirq", ub, k);
	printf("OWN %s %zu %.0f %.0f %.0f %.0f %.0f\n", m, k,
	       c2ns(quantile(ent, k, 0.5)), c2ns(quantile(res, k, 0.5)),
	       c2ns(quantile(tot, k, 0.5)), c2ns(quantile(ub, k, 0.5)), null_syscall_ns);
out:
	free(ent);
	free(res);
	free(tot);
	free(hw);
	free(ub);
}

/* --- The kernel's stamp at the x86 interrupt entry ----------------------- */

/*
 * X86_IRQ_ENTRY_STAMP, a benchmark-only kernel option, keeps the TSC of
 * the first device interrupt entry per CPU and vector since the list was
 * last read, and lists it in debugfs as "cpu irq cycles" lines; reading
 * clears it.  Read before each raise and after its sample, off the
 * measured path.
 */
#define ENTRY_STAMPS	"/sys/kernel/debug/x86/irq_entry_cycles"
static int entry_fd = -1;

static uint64_t entry_cycles(void)
{
	static char buf[16384];
	unsigned long long cyc;
	int cpu, irq;
	ssize_t n;
	char *p;

	if (entry_fd < 0)
		return 0;
	n = pread(entry_fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	for (p = buf; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (sscanf(p, "%d %d %llu", &cpu, &irq, &cyc) == 3 &&
		    cpu == irq_cpu && irq == cur_irq)
			return cyc;
	return 0;
}

/* --- One cell: a method in a scenario ----------------------------------- */

static uint64_t *kernel_floor[NR_SCENS];
static size_t kernel_floor_n[NR_SCENS];

static bool wait_done(unsigned int want, bool uio, uint64_t timeout_ns)
{
	uint64_t end = t_now_ns() + timeout_ns;
	unsigned int i = 0;

	for (;;) {
		if (atomic_load_explicit(&C.n, memory_order_acquire) >= want &&
		    (!uio || atomic_load_explicit(&C.armed, memory_order_acquire) >= want))
			return true;
		if (opt_sleepwait || cur_scen == S_LOADED)
			sleep_us(opt_sleepwait ? opt_sleepwait : 5);
		if (++i % 4096 == 0 && t_now_ns() > end)
			return false;
	}
}

/* Write every page the handler writes: fork and exec leave them COW. */
static void touch_samples(void)
{
	memset(C.s, 0, (size_t)C.cap * sizeof(*C.s));
}

static int run_latency(enum method m, enum scen s)
{
	unsigned int total = opt_warm + opt_n, i, bad = 0, k = 0;
	bool uio = m == M_UIO;
	uint64_t *r2h = NULL, *h2h = NULL, *kf = NULL, *e2h = NULL;
	unsigned int ke = 0, bade = 0;
	int ret = 0;

	C.cap = total;
	touch_samples();
	atomic_store(&C.n, 0);
	atomic_store(&C.armed, 0);
	C.rt_left = 0;
	if (s == S_OWNER) {
		atomic_store(&spin.n, 0);
		atomic_store(&spin.record, 1);
	}
	for (i = 0; i < total; i++) {
		sleep_us(opt_gap_us);
		entry_cycles();		/* clears what came before the raise */
		C.s[i].raise = t_rdtsc();
		edu_raise(&e, 1);
		if (!wait_done(i + 1, uio, 2000000000ull)) {
			printf("INFO error: %s %s: sample %u: no handler call within 2 s\n",
			       method_name[m], scen_name[s], i);
			ret = -ETIMEDOUT;
			break;
		}
		C.s[i].irqentry = entry_cycles();
	}
	atomic_store(&spin.record, 0);
	if (ret)
		return ret;
	if (atomic_load(&C.n) != total) {
		printf("INFO error: %s %s: %u handler calls for %u raises\n",
		       method_name[m], scen_name[s], atomic_load(&C.n), total);
		return -EPROTO;
	}

	r2h = calloc(opt_n, sizeof(*r2h));
	h2h = calloc(opt_n, sizeof(*h2h));
	kf = calloc(opt_n, sizeof(*kf));
	e2h = calloc(opt_n, sizeof(*e2h));
	if (!r2h || !h2h || !kf || !e2h) {
		ret = -ENOMEM;
		goto out;
	}
	for (i = opt_warm; i < total; i++) {
		const struct sample *x = &C.s[i];

		if (x->entry < x->raise || (!uio && (x->hw < x->raise || x->hw > x->entry))) {
			bad++;
			continue;
		}
		/* The entry stamp precedes the hard handler's, if it is this interrupt's. */
		if (entry_fd >= 0) {
			if (x->irqentry < x->raise || x->irqentry > x->entry ||
			    (!uio && x->irqentry > x->hw))
				bade++;
			else
				e2h[ke++] = x->entry - x->irqentry;
		}
		r2h[k] = x->entry - x->raise;
		h2h[k] = uio ? 0 : x->entry - x->hw;
		kf[k] = x->hw - x->raise;
		k++;
	}
	if (bad)
		printf("INFO %s %s: %u of %u samples discarded (stamp older than the raise)\n",
		       method_name[m], scen_name[s], bad, opt_n);
	report(method_name[m], scen_name[s], "raise-to-handler", r2h, k);
	if (uio)
		printf("ROW %s %s hardirq-to-handler 0 NA NA NA NA NA\n", method_name[m], scen_name[s]);
	else
		report(method_name[m], scen_name[s], "hardirq-to-handler", h2h, k);
	if (bade)
		printf("INFO %s %s: %u entry stamps not of the sample's interrupt, left out\n",
		       method_name[m], scen_name[s], bade);
	report(method_name[m], scen_name[s], "entry-to-handler", e2h, ke);
	if (m == M_UPCALL) {
		kernel_floor[s] = kf;
		kernel_floor_n[s] = k;
		kf = NULL;
	}
	if ((m == M_UPCALL || m == M_UPCALL_MSI || m == M_UPCALL_MMIO) && s == S_OWNER)
		own_cost(method_name[m], C.s, opt_warm, total);
out:
	free(r2h);
	free(h2h);
	free(kf);
	free(e2h);
	return ret;
}

/*
 * Round trips, two ways: the handler acknowledges and raises again
 * ("round-trip", the definition), or the raiser raises again as
 * soon as it sees the handler's sample ("round-trip-xcpu").
 */
static int run_roundtrip(enum method m, enum scen s, bool xcpu)
{
	const char *span = xcpu ? "round-trip-xcpu" : "round-trip";
	unsigned int want = opt_rt, i, got;
	uint64_t *d, dt;
	bool ok = true;

	if (want < 2)
		return 0;
	C.cap = want;
	touch_samples();
	atomic_store(&C.n, 0);
	atomic_store(&C.armed, 0);
	C.rt_left = xcpu ? 0 : want - 1;
	sleep_us(opt_gap_us);
	if (xcpu) {
		for (i = 0; i < want && ok; i++) {
			edu_raise(&e, 1);
			ok = wait_done(i + 1, m == M_UIO, 2000000000ull);
		}
	} else {
		edu_raise(&e, 1);
		ok = wait_done(want, false, (uint64_t)opt_rt_s * 1000000000u);
	}
	C.rt_left = 0;
	got = atomic_load(&C.n);
	if (!ok) {
		printf("INFO %s %s %s: stopped after %u of %u handler calls (%u s limit)\n",
		       method_name[m], scen_name[s], span, got, want, xcpu ? 2 : opt_rt_s);
		/* Let a raise in flight land, then stop the chain. */
		sleep_us(20000);
		edu_ack(&e, ~0u);
		got = atomic_load(&C.n);
		if (got > want)
			got = want;
		if (got < 2)
			return -ETIMEDOUT;
	}
	d = calloc(got, sizeof(*d));
	if (!d)
		return -ENOMEM;
	for (i = 1; i < got; i++)
		d[i - 1] = C.s[i].entry - C.s[i - 1].entry;
	dt = C.s[got - 1].entry - C.s[0].entry;
	printf("RATE %s %s %s %u %.0f %.0f\n", method_name[m], scen_name[s], span, got - 1,
	       (double)(got - 1) * tsc_hz / (double)dt, (double)dt / (got - 1));
	report(method_name[m], scen_name[s], span, d, got - 1);
	free(d);
	/* uio: the last handler left INTx to its thread; let it finish. */
	sleep_us(1000);
	/* Stopped by the time limit: a measurement, not a failure. */
	return 0;
}

static int run_cell(enum method m, enum scen s)
{
	int ret, r;
	uint64_t t0 = t_now_ns();

	ret = method_start(m);
	if (ret) {
		printf("INFO error: %s: registration: %s\n", method_name[m], strerror(-ret));
		method_stop();
		t_pin(raise_cpu);
		return ret;
	}
	cur_scen = s;
	ret = scenario_start(s);
	if (ret) {
		printf("INFO error: scenario %s: %s\n", scen_name[s], strerror(-ret));
		scenario_stop();
		method_stop();
		return ret;
	}
	/* A level latched by QEMU's IO-APIC before the claim may fire once. */
	sleep_us(10000);
	if (atomic_load(&C.n))
		printf("INFO %s %s: %u handler calls before the first raise\n",
		       method_name[m], scen_name[s], atomic_load(&C.n));

	ret = run_latency(m, s);
	if (!ret && s != S_LOADED)
		ret = run_roundtrip(m, s, false);
	if (!ret && s != S_LOADED)
		ret = run_roundtrip(m, s, true);
	method_stats(m, s);
	scenario_stop();
	r = method_stop();
	if (r) {
		printf("INFO error: %s: teardown: %s\n", method_name[m], strerror(-r));
		ret = ret ? ret : r;
	}
	printf("INFO cell %s %s done in %.1f s%s\n", method_name[m], scen_name[s],
	       (t_now_ns() - t0) / 1e9, ret ? " (FAILED)" : "");
	fflush(stdout);
	return ret;
}

/* --- Calibration and the null system call -------------------------------- */

static double calibrate(unsigned int ms)
{
	uint64_t n0, n1, t0, t1;

	n0 = t_now_ns();
	t0 = t_rdtsc();
	sleep_us(ms * 1000);
	n1 = t_now_ns();
	t1 = t_rdtsc();
	return (double)(t1 - t0) * 1e9 / (double)(n1 - n0);
}

static void null_syscall(void)
{
	enum { N = 100000 };
	uint64_t *v = calloc(N, sizeof(*v)), *w = calloc(N, sizeof(*w)), t;
	unsigned int i;

	if (!v || !w)
		goto out;
	for (i = 0; i < N; i++) {
		t = t_rdtsc();
		syscall(SYS_getppid);
		v[i] = t_rdtsc() - t;
		t = t_rdtsc();
		w[i] = t_rdtsc() - t;
	}
	qsort(v, N, sizeof(*v), cmp_u64);
	qsort(w, N, sizeof(*w), cmp_u64);
	rdtsc_ns = c2ns(quantile(w, N, 0.5));
	null_syscall_ns = c2ns(quantile(v, N, 0.5)) - rdtsc_ns;
	printf("NULL getppid %.0f %.0f %.0f %.0f\n", c2ns(quantile(v, N, 0.5)), rdtsc_ns,
	       null_syscall_ns, (double)quantile(v, N, 0.5) - (double)quantile(w, N, 0.5));
	printf("INFO null syscall (getppid) p50 %.0f ns bracketed, %.0f ns for two back-to-back rdtsc, %.0f ns net\n",
	       c2ns(quantile(v, N, 0.5)), rdtsc_ns, null_syscall_ns);
out:
	free(v);
	free(w);
}

/* --- Main --------------------------------------------------------------- */

static unsigned int parse_list(const char *arg, const char *const *names, int nr)
{
	unsigned int mask = 0;
	char *copy = strdup(arg), *tok, *save = NULL;
	int i;

	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		for (i = 0; i < nr; i++)
			if (!strcmp(tok, names[i]))
				mask |= 1u << i;
		if (!strcmp(tok, "all"))
			mask = (1u << nr) - 1;
	}
	free(copy);
	return mask;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: uli-bench [-n SAMPLES] [-w WARMUP] [-r ROUNDTRIPS] [-t RT_LIMIT_S] [-g GAP_US]\n"
		"                 [-S SLEEP_US] [-c CALIBRATION_MS] [-m METHOD,...] [-s SCENARIO,...]\n"
		"                 [-x SHARE_PERMILLE] [-q]\n"
		"  methods: upcall,upcall-msi,upcall-mmio,proc-read,proc-msi,proc-mmio,proc-epoll,uio-read\n"
		"  scenarios: idle,foreign,owner,loaded\n"
		"  -q: no CDF lines; -S: the raiser sleeps SLEEP_US between its checks\n"
		"  for the handler (for ICOUNT, where a spinning vCPU delays the other's)\n");
	exit(2);
}

int main(int argc, char **argv)
{
	int opt, ret, failed = 0, ncpus, m, s;
	double hz2;

	if (argc == 3 && !strcmp(argv[1], "--spin"))
		return foreign_main(atoi(argv[2]));
	if (argc == 4 && !strcmp(argv[1], "--load"))
		return load_main(argv[2], atoi(argv[3]));

	while ((opt = getopt(argc, argv, "n:w:r:t:g:S:c:m:s:x:q")) != -1) {
		switch (opt) {
		case 'n': opt_n = strtoul(optarg, NULL, 0); break;
		case 'w': opt_warm = strtoul(optarg, NULL, 0); break;
		case 'r': opt_rt = strtoul(optarg, NULL, 0); break;
		case 't': opt_rt_s = strtoul(optarg, NULL, 0); break;
		case 'S': opt_sleepwait = strtoul(optarg, NULL, 0); break;
		case 'g': opt_gap_us = strtoul(optarg, NULL, 0); break;
		case 'c': opt_cal_ms = strtoul(optarg, NULL, 0); break;
		case 'm': opt_methods = parse_list(optarg, method_name, NR_METHODS); break;
		case 's': opt_scens = parse_list(optarg, scen_name, NR_SCENS); break;
		case 'q': opt_cdf = false; break;
		case 'x': opt_share = strtoul(optarg, NULL, 0); break;
		default: usage();
		}
	}
	if (!opt_n || !opt_methods || !opt_scens || !opt_cal_ms)
		usage();
	setvbuf(stdout, NULL, _IOLBF, 0);

	if (mlockall(MCL_CURRENT | MCL_FUTURE)) {
		perror("uli-bench: mlockall");
		return 1;
	}
	fifo_prio = sched_get_priority_max(SCHED_FIFO) - 10;	/* libuli's */
	spin.g = calloc(NR_GAPS, sizeof(*spin.g));
	C.s = calloc(opt_warm + opt_n > opt_rt ? opt_warm + opt_n : opt_rt, sizeof(*C.s));
	if (!spin.g || !C.s) {
		perror("uli-bench: calloc");
		return 1;
	}
	memset(spin.g, 0, NR_GAPS * sizeof(*spin.g));

	ret = edu_open(&e, EDU_SLOT_C);
	if (ret) {
		fprintf(stderr, "uli-bench: edu@%d: %s\n", EDU_SLOT_C, strerror(-ret));
		return 1;
	}
	edu_ack(&e, ~0u);
	ret = edu_set_intx(&e, true);
	if (ret) {
		fprintf(stderr, "uli-bench: INTx: %s\n", strerror(-ret));
		return 1;
	}

	ncpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
	irq_cpu = ncpus - 1;
	raise_cpu = ncpus > 1 ? 0 : irq_cpu;
	if (ncpus < 2) {
		/* The raiser is the only thing that can run: owner scenario only. */
		printf("INFO SMP=1: the raiser runs on the IRQ's CPU; only the owner scenario (raiser = owner) is run\n");
		opt_scens &= 1u << S_OWNER;
		if (!opt_scens) {
			fprintf(stderr, "uli-bench: SMP=1 allows only the owner scenario\n");
			return 1;
		}
	}
	ret = t_set_irq_cpu(e.irq, irq_cpu);
	if (ret) {
		fprintf(stderr, "uli-bench: irq %d affinity: %s\n", e.irq, strerror(-ret));
		return 1;
	}

	if (t_pin(raise_cpu)) {
		perror("uli-bench: sched_setaffinity");
		return 1;
	}
	tsc_hz = calibrate(opt_cal_ms);
	printf("TSC %.0f\n", tsc_hz);
	printf("INFO TSC %.3f MHz, measured against CLOCK_MONOTONIC over %u ms\n",
	       tsc_hz / 1e6, opt_cal_ms);
	printf("INFO edu@%s irq %d on CPU %d, raiser on CPU %d, %u samples (+%u warm-up), %u round trips, gap %u us\n",
	       e.bdf, e.irq, irq_cpu, raise_cpu, opt_n, opt_warm, opt_rt, opt_gap_us);
	printf("INFO upcall registrations' CPU share: %u/1000%s\n", opt_share,
	       opt_share == ULI_DEFAULT_SHARE ? " (the default)" : " (-x)");
	null_syscall();
	entry_fd = open(ENTRY_STAMPS, O_RDONLY | O_CLOEXEC);
	if (entry_fd < 0)
		printf("INFO no %s (%s): no entry-to-handler span\n", ENTRY_STAMPS, strerror(errno));

	for (m = 0; m < NR_METHODS; m++) {
		if (!(opt_methods & 1u << m))
			continue;
		for (s = 0; s < NR_SCENS; s++) {
			if (!(opt_scens & 1u << s))
				continue;
			if (run_cell(m, s))
				failed++;
		}
	}
	for (s = 0; s < NR_SCENS; s++) {
		if (kernel_floor[s]) {
			report("kernel", scen_name[s], "raise-to-handler",
			       kernel_floor[s], kernel_floor_n[s]);
			free(kernel_floor[s]);
		}
	}

	hz2 = calibrate(opt_cal_ms);
	printf("INFO TSC re-measured at the end: %.3f MHz (%+.3f%%)\n", hz2 / 1e6,
	       (hz2 - tsc_hz) * 100 / tsc_hz);
	edu_ack(&e, ~0u);
	edu_close(&e);
	printf("DONE %d\n", failed);
	return failed ? 1 : 0;
}
