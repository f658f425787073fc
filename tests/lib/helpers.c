// SPDX-License-Identifier: MIT
/* helpers.c - the tests' and examples' shared helpers; see helpers.h. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/uli.h>

#include "helpers.h"

uint64_t t_test_n(uint64_t part)
{
	const char *v = getenv("ULI_TEST_N");
	uint64_t n = v ? strtoull(v, NULL, 0) : 100000;

	return n / part ? n / part : 1;
}

uint64_t t_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t t_tsc_per_ms(void)
{
	uint64_t t0 = t_now_ns(), c0 = t_rdtsc(), t1, c1;

	usleep(50000);
	t1 = t_now_ns();
	c1 = t_rdtsc();
	return (c1 - c0) * 1000000 / (t1 - t0);
}

int t_irq_cpu(int irq)
{
	char path[64];
	int cpu = -EPROTO;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/irq/%d/effective_affinity_list", irq);
	f = fopen(path, "r");
	if (!f)
		return -errno;
	if (fscanf(f, "%d", &cpu) != 1)
		cpu = -EPROTO;
	fclose(f);
	return cpu;
}

int t_set_irq_cpu(int irq, int cpu)
{
	char path[64], buf[16];

	snprintf(path, sizeof(path), "/proc/irq/%d/smp_affinity_list", irq);
	snprintf(buf, sizeof(buf), "%d\n", cpu);
	return t_write_file(path, buf);
}

int t_uli_irq(void *uli, const struct edu *e)
{
	int irq = ULI_irq(uli);

	if (irq >= 0)
		return irq;
	irq = t_msi_irq(e);
	return irq > 0 ? irq : -1;
}

int t_ncpus(void)
{
	return (int)sysconf(_SC_NPROCESSORS_ONLN);
}

int t_pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set) ? -errno : 0;
}

bool t_wait_count(volatile uint64_t *counter, uint64_t want,
		  unsigned int timeout_ms)
{
	uint64_t end = t_now_ns() + (uint64_t)timeout_ms * 1000000u;
	unsigned int i = 0;

	while (*counter < want)
		if (++i % 1024 == 0 && t_now_ns() > end)
			return false;
	return true;
}

void *t_register(const struct edu *e, uli_func_t func, void *arg,
		 int nsemas, void *stack, int stacksize, int how)
{
	if (how == T_MMIO)
		return ULI_register_mmio(e->bdf, &edu_uli_regs, func, arg, nsemas,
					 stack, stacksize);
	return ULI_register_pci(e->bdf, func, arg, nsemas, stack, stacksize, how);
}

void *t_owner_register(const struct edu *e, const char *cg, uli_func_t func,
		       void *page, volatile int *ready)
{
	char path[256], pid[32];
	void *uli;

	snprintf(path, sizeof(path), "%s/cgroup.procs", cg ? cg : "");
	snprintf(pid, sizeof(pid), "%d", getpid());
	if (cg && t_write_file(path, pid) < 0)
		goto fail;
	uli = ULI_register_pci(e->bdf, func, NULL, 0, NULL, 0, ULI_INTX);
	if (!uli || ULI_pin(uli, page, 4096))
		goto fail;
	return uli;
fail:
	*ready = -errno;
	_exit(1);
}

pid_t t_spawn(int cpu, void (*fn)(void))
{
	pid_t pid = fork();

	if (pid == 0) {
		/* Dies with its test, even one ended by a failed ASSERT. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		t_pin(cpu);
		fn();
		_exit(0);
	}
	return pid;
}

void t_stop(pid_t pid)
{
	if (pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
}

long t_ctxt_switches(pid_t pid, pid_t tid)
{
	char path[96], line[128];
	long v = 0, n, total = 0;
	FILE *f;

	if (tid)
		snprintf(path, sizeof(path), "/proc/%d/task/%d/status", pid, tid);
	else
		snprintf(path, sizeof(path), "/proc/%d/status", pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "voluntary_ctxt_switches: %ld", &n) == 1)
			v += n, total++;
		else if (sscanf(line, "nonvoluntary_ctxt_switches: %ld", &n) == 1)
			v += n, total++;
	}
	fclose(f);
	return total == 2 ? v : -1;
}

bool t_upcall_mode(void)
{
	const char *m = getenv("ULI_MODE");

	return !m || !*m || !strcmp(m, "upcall");
}

int t_uli_fd(void)
{
	char link[64];
	struct dirent *d;
	int fd = -1, n = 0;
	DIR *dir = opendir("/proc/self/fd");
	ssize_t len;

	if (!dir)
		return -1;
	while ((d = readdir(dir))) {
		if (d->d_name[0] == '.')
			continue;
		len = readlinkat(dirfd(dir), d->d_name, link, sizeof(link) - 1);
		if (len <= 0)
			continue;
		link[len] = 0;
		if (!strcmp(link, "/dev/uli")) {
			fd = atoi(d->d_name);
			n++;
		}
	}
	closedir(dir);
	return n == 1 ? fd : -1;
}

int t_write_file_flags(const char *path, const char *s, int flags)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC | flags), ret = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, s, strlen(s)) < 0)
		ret = -errno;
	close(fd);
	return ret;
}

int t_write_file(const char *path, const char *s)
{
	return t_write_file_flags(path, s, 0);
}

uint64_t t_raise_each(const struct edu *e, volatile uint64_t *handled,
		      uint64_t n, unsigned int timeout_ms)
{
	uint64_t i;

	for (i = 0; i < n; i++) {
		uint64_t want = *handled + 1;

		edu_raise(e, 1);
		if (!t_wait_count(handled, want, timeout_ms))
			break;
	}
	return i;
}

uint64_t t_aborts(const struct uli_stats *st)
{
	return st->aborted_fault + st->aborted_illegal + st->aborted_fpe +
	       st->aborted_syscall + st->aborted_timeout;
}

bool t_uli_offered(void)
{
	struct uli_register r = { 0 };	/* source 0: EINVAL where offered */
	int fd = open("/dev/uli", O_RDWR | O_CLOEXEC);
	bool offered;

	if (fd < 0)
		return false;
	offered = !(ioctl(fd, ULI_IOC_REGISTER, &r) && errno == EOPNOTSUPP);
	close(fd);
	return offered;
}

int t_registrations(void)
{
	char line[512];
	int n = -1;
	FILE *f = fopen("/sys/kernel/debug/uli", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		n++;
	fclose(f);
	return n;
}

long t_field_kb(const char *path, const char *key)
{
	char line[256];
	size_t len = strlen(key);
	long v = -1;
	FILE *f = fopen(path, "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, len) && line[len] == ':')
			v = strtol(line + len + 1, NULL, 10);
	fclose(f);
	return v;
}

void t_shrink_slabs(void)
{
	char path[300];
	struct dirent *d;
	DIR *dir = opendir("/sys/kernel/slab");

	if (!dir)
		return;
	while ((d = readdir(dir)))
		if (d->d_name[0] != '.') {
			snprintf(path, sizeof(path), "/sys/kernel/slab/%s/shrink", d->d_name);
			t_write_file(path, "1\n");
		}
	closedir(dir);
}

long t_meminfo_kb(const char *key)
{
	long v = -1, prev;
	int i;

	/*
	 * Objects freed through RCU wait for a grace period, and on a CPU
	 * whose callbacks are offloaded (nohz_full=) with RCU_LAZY for up to
	 * 10 s more.  drop_caches runs RCU's shrinker, which flushes the
	 * lazy ones; their grace period ends a little later.  Read until
	 * two readings 50 ms apart agree within 32 kB (2 s at most).
	 */
	for (i = 0; i < 40; i++) {
		t_write_file("/proc/sys/vm/drop_caches", "3\n");
		t_shrink_slabs();
		prev = v;
		v = t_field_kb("/proc/meminfo", key);
		if (i && labs(v - prev) <= 32)
			break;
		usleep(50000);
	}
	return v;
}

bool t_cpuinfo_has(const char *key, const char *word)
{
	char line[4096];
	bool found = false;
	size_t n = strlen(word);
	FILE *f = fopen("/proc/cpuinfo", "r");

	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		char *p = strchr(line, ':');

		if (strncmp(line, key, strlen(key)) || !p)
			continue;
		for (p = strstr(p, word); p && !found; p = strstr(p + 1, word))
			found = p[-1] == ' ' && (p[n] == ' ' || p[n] == '\n');
		break;
	}
	fclose(f);
	return found;
}

long t_status_kb(pid_t pid, const char *key)
{
	char path[64];

	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	else
		snprintf(path, sizeof(path), "/proc/self/status");
	return t_field_kb(path, key);
}

uint64_t t_ms_since(uint64_t t0)
{
	return (t_now_ns() - t0) / 1000000u;
}

void t_msleep(unsigned int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

int t_irq_open(int irq, int flags)
{
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/proc/irq/%d/irq", irq);
	fd = open(path, O_RDONLY | O_CLOEXEC | flags);
	return fd < 0 ? -errno : fd;
}

void t_irq_close(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

long t_irq_read4(int fd)
{
	uint32_t c;
	ssize_t n = read(fd, &c, sizeof(c));

	if (n < 0)
		return -errno;
	return n == sizeof(c) ? (long)c : -EIO;
}

long t_irq_read_ev(int fd, struct irq_user_event *ev)
{
	/* count and status: 8 bytes (the event_struct test reads 16). */
	ssize_t n = read(fd, ev, 8);

	return n < 0 ? -errno : n;
}

int t_irq_set_device(int fd, const struct irq_user_dev *d)
{
	return ioctl(fd, IRQ_USER_SET_DEVICE, d) ? -errno : 0;
}

int t_set_nonblock(int fd, bool on)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0)
		return -errno;
	fl = on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK;
	return fcntl(fd, F_SETFL, fl) ? -errno : 0;
}

int t_poll(int fd, short events, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = events };
	int n = poll(&p, 1, timeout_ms);

	if (n < 0)
		return -errno;
	return n ? p.revents : 0;
}

int t_ep_open(int fd)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET };
	int ep = epoll_create1(EPOLL_CLOEXEC);

	if (ep < 0)
		return -errno;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev)) {
		int err = -errno;

		close(ep);
		return err;
	}
	return ep;
}

int t_ep_wait(int ep, int timeout_ms)
{
	struct epoll_event ev;
	int n = epoll_wait(ep, &ev, 1, timeout_ms);

	if (n < 0)
		return -errno;
	if (n && !(ev.events & EPOLLIN))
		return -EPROTO;
	return n;
}

long t_irq_cycle(const struct edu *e, int fd)
{
	int ep = t_ep_open(fd), r;
	long c;

	if (ep < 0)
		return ep;
	r = t_ep_wait(ep, 0);
	if (r) {
		close(ep);
		return r < 0 ? r : -EEXIST;
	}
	edu_raise(e, 1);
	r = t_ep_wait(ep, 2000);
	close(ep);
	if (r != 1) {
		edu_ack(e, 1);
		return r < 0 ? r : -ETIMEDOUT;
	}
	c = t_irq_read4(fd);
	edu_ack(e, 1);
	return c;
}

bool t_threadirqs(void)
{
	char buf[512];

	return t_read_file("/proc/cmdline", buf, sizeof(buf)) > 0 &&
	       strstr(buf, "threadirqs");
}

long t_read_file(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t got = 0;
	ssize_t n;

	if (fd < 0)
		return -errno;
	while (got < len - 1 && (n = read(fd, buf + got, len - 1 - got)) > 0)
		got += n;
	close(fd);
	buf[got] = 0;
	return got;
}

int t_irq_ddepth(int irq)
{
	char path[96], buf[2048], *p;
	long n;
	unsigned int d;

	snprintf(path, sizeof(path), T_DEBUGFS_IRQS "/%d", irq);
	n = t_read_file(path, buf, sizeof(buf));
	if (n < 0)
		return n;
	p = strstr(buf, "\nddepth:");
	if (!p || sscanf(p + 8, "%u", &d) != 1)
		return -EPROTO;
	return d;
}

int t_irq_spurious(int irq, unsigned int *count, unsigned int *unhandled)
{
	char path[64], buf[256];
	long n;

	snprintf(path, sizeof(path), "/proc/irq/%d/spurious", irq);
	n = t_read_file(path, buf, sizeof(buf));
	if (n < 0)
		return n;
	if (sscanf(buf, "count %u\nunhandled %u", count, unhandled) != 2)
		return -EPROTO;
	return 0;
}

/*
 * Find the row of /proc/interrupts named @key ("24", "IWI"): *row points
 * just past its colon, in a buffer the next call reuses.  0 or -errno.
 */
static int t_interrupts_row(const char *key, char **row)
{
	static char buf[65536];
	char *line, *save = NULL, *p;
	size_t len = strlen(key);
	long n = t_read_file("/proc/interrupts", buf, sizeof(buf));

	if (n < 0)
		return n;
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		for (p = line; *p == ' '; p++)
			;
		if (!strncmp(p, key, len) && p[len] == ':') {
			*row = p + len + 1;
			return 0;
		}
	}
	return -ENOENT;
}

int t_irq_stat(int irq, unsigned long long *total, char *actions, size_t alen)
{
	char key[16], *p, *end;
	int ret;

	snprintf(key, sizeof(key), "%d", irq);
	ret = t_interrupts_row(key, &p);
	if (ret)
		return ret;
	*total = 0;
	for (;;) {
		unsigned long long v;

		while (*p == ' ')
			p++;
		if (*p < '0' || *p > '9')
			break;
		v = strtoull(p, &end, 10);
		if (*end != ' ' && *end != 0)
			break;
		*total += v;
		p = end;
	}
	if (actions) {
		/* Skip the chip and "hwirq-flow" fields. */
		for (int f = 0; f < 2; f++) {
			while (*p == ' ')
				p++;
			while (*p && *p != ' ')
				p++;
		}
		while (*p == ' ')
			p++;
		snprintf(actions, alen, "%s", p);
	}
	return 0;
}

long long t_arch_irq_count(const char *name, int cpu)
{
	char *p, *end;
	int ret = t_interrupts_row(name, &p);

	if (ret)
		return ret;
	/* A column per online CPU: @cpu is its index when all are. */
	for (int c = 0;; c++) {
		unsigned long long v = strtoull(p, &end, 10);

		if (end == p)
			return -ENOENT;
		if (c == cpu)
			return v;
		p = end;
	}
}

unsigned long long t_irq_total(int irq)
{
	unsigned long long t = 0;

	t_irq_stat(irq, &t, NULL, 0);
	return t;
}

bool t_irq_has_action(int irq, const char *what)
{
	unsigned long long t;
	char act[512];

	if (t_irq_stat(irq, &t, act, sizeof(act)))
		return false;
	return strstr(act, what) != NULL;
}

int t_irq_nactions(int irq)
{
	unsigned long long t;
	char act[512], *p;
	int n;

	if (t_irq_stat(irq, &t, act, sizeof(act)) || !act[0])
		return 0;
	for (n = 1, p = act; (p = strstr(p, ", ")); p += 2)
		n++;
	return n;
}

const char *t_irq_user_name(void)
{
	static char name[32];
	char comm[20] = "";

	if (!name[0]) {
		t_read_file("/proc/self/comm", comm, sizeof(comm));
		comm[strcspn(comm, "\n")] = 0;
		snprintf(name, sizeof(name), "user:%s", comm);
	}
	return name;
}

int t_line_flush(const struct edu *e)
{
	int fd;

	if (t_irq_nactions(e->irq))
		return 0;
	fd = t_irq_open(e->irq, O_NONBLOCK);
	if (fd < 0)
		return fd;
	t_irq_read4(fd);
	edu_raise(e, 1);
	t_poll(fd, POLLIN, 100);
	edu_ack(e, 1);
	t_msleep(2);
	t_irq_read4(fd);
	close(fd);
	return 0;
}

static void *raiser_fn(void *arg)
{
	struct t_raiser *r = arg;

	t_msleep(r->delay_ms);
	r->raised_ns = t_now_ns();
	edu_raise(r->e, r->bits);
	return NULL;
}

int t_raise_later(struct t_raiser *r, const struct edu *e,
		  unsigned int delay_ms, uint32_t bits)
{
	r->e = e;
	r->delay_ms = delay_ms;
	r->bits = bits;
	r->raised_ns = 0;
	return -pthread_create(&r->th, NULL, raiser_fn, r);
}

int t_msi_irq(const struct edu *e)
{
	char path[96];
	struct dirent *de;
	int vec = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/msi_irqs", e->bdf);
	d = opendir(path);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			vec = atoi(de->d_name);
	closedir(d);
	return vec;
}

int t_uio_open(const struct edu *e)
{
	char path[32];
	int idx = edu_uio_index(e), fd;

	if (idx < 0)
		return idx;
	snprintf(path, sizeof(path), "/dev/uio%d", idx);
	fd = open(path, O_RDWR | O_CLOEXEC | O_NONBLOCK);
	return fd < 0 ? -errno : fd;
}

long t_uio_wait(int fd, int timeout_ms)
{
	int32_t c;
	int r = t_poll(fd, POLLIN, timeout_ms);

	if (r < 0)
		return r;
	if (!r)
		return -ETIMEDOUT;
	if (read(fd, &c, sizeof(c)) != sizeof(c))
		return -errno;
	return c;
}

long t_uio_count(const struct edu *e)
{
	char path[64], buf[32];
	int idx = edu_uio_index(e);
	long n;

	if (idx < 0)
		return idx;
	snprintf(path, sizeof(path), "/sys/class/uio/uio%d/event", idx);
	n = t_read_file(path, buf, sizeof(buf));
	return n < 0 ? n : strtol(buf, NULL, 10);
}

int t_caps_get(struct __user_cap_data_struct d[2])
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };

	return syscall(SYS_capget, &h, d) ? -errno : 0;
}

int t_caps_set(struct __user_cap_data_struct d[2])
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };

	return syscall(SYS_capset, &h, d) ? -errno : 0;
}

void t_cap_clear(struct __user_cap_data_struct d[2], int cap)
{
	d[CAP_TO_INDEX(cap)].effective &= ~CAP_TO_MASK(cap);
	d[CAP_TO_INDEX(cap)].permitted &= ~CAP_TO_MASK(cap);
	d[CAP_TO_INDEX(cap)].inheritable &= ~CAP_TO_MASK(cap);
}

char t_thread_state(pid_t tid)
{
	char path[64], buf[512], *p;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)tid);
	if (t_read_file(path, buf, sizeof(buf)) <= 0)
		return 0;
	p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : 0;
}

long t_thread_syscall(pid_t tid)
{
	char path[64], buf[256];

	snprintf(path, sizeof(path), "/proc/%d/syscall", (int)tid);
	if (t_read_file(path, buf, sizeof(buf)) <= 0 || buf[0] < '0' || buf[0] > '9')
		return -1;
	return strtol(buf, NULL, 10);
}

bool t_wait_blocked(pid_t tid, long nr, unsigned int timeout_ms)
{
	uint64_t t0 = t_now_ns();

	do {
		if (t_thread_state(tid) == 'S') {
			long sc = t_thread_syscall(tid);

			if (sc == nr || sc == -1)
				return true;
		}
		t_msleep(1);
	} while (t_ms_since(t0) < timeout_ms);
	return false;
}
