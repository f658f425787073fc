/* SPDX-License-Identifier: GPL-2.0 */
/*
 * proc_util.h - helpers shared by the /proc/irq/N/irq tests (proc_*.c).
 *
 * Everything returns a value or -errno and never asserts, so that the
 * tests keep their ASSERT_*()s (which need the harness's _metadata) in
 * the test bodies.  All functions are static inline: each test uses a
 * different subset, and -Werror must not trip over the unused ones.
 */
#ifndef PROC_UTIL_H
#define PROC_UTIL_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <linux/capability.h>
#include <linux/irq_user.h>

#include "edu.h"

/*
 * The 6.12 harness has an unused parameter (__timeout_handler's ucontext),
 * which -Wextra -Werror rejects: include it through here.
 */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "kselftest_harness.h"
#pragma GCC diagnostic pop
/*
 * TEST_F()'s wrapper keeps "child" across its setjmp(); gcc -O2 warns
 * (-Wclobbered) in the expansion, in our files.  A failed ASSERT may then
 * skip FIXTURE_TEARDOWN, which is why every FIXTURE_SETUP here also
 * cleans up after a previous test.
 */
#pragma GCC diagnostic ignored "-Wclobbered"

#define DEBUGFS_IRQS	"/sys/kernel/debug/irq/irqs"

static inline uint64_t pu_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline uint64_t pu_ms_since(uint64_t t0)
{
	return (pu_now_ns() - t0) / 1000000u;
}

static inline void pu_msleep(unsigned int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* --- /proc/irq/N/irq --------------------------------------------------- */

/* fd or -errno */
static inline int irq_open(int irq, int flags)
{
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/proc/irq/%d/irq", irq);
	fd = open(path, O_RDONLY | O_CLOEXEC | flags);
	return fd < 0 ? -errno : fd;
}

static inline void irq_close(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* The count of a 4-byte read, or -errno. */
static inline long irq_read4(int fd)
{
	uint32_t c;
	ssize_t n = read(fd, &c, sizeof(c));

	if (n < 0)
		return -errno;
	return n == sizeof(c) ? (long)c : -EIO;
}

/* Bytes read (8) into *ev, or -errno. */
static inline long irq_read_ev(int fd, struct irq_user_event *ev)
{
	/* count and status: 8 bytes (the event_struct test reads 16). */
	ssize_t n = read(fd, ev, 8);

	return n < 0 ? -errno : n;
}

/* 0 or -errno */
static inline int irq_set_device(int fd, const struct irq_user_dev *d)
{
	return ioctl(fd, IRQ_USER_SET_DEVICE, d) ? -errno : 0;
}

static inline int irq_set_nonblock(int fd, bool on)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0)
		return -errno;
	fl = on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK;
	return fcntl(fd, F_SETFL, fl) ? -errno : 0;
}

/* revents, 0 on timeout, or -errno. */
static inline int pu_poll(int fd, short events, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = events };
	int n = poll(&p, 1, timeout_ms);

	if (n < 0)
		return -errno;
	return n ? p.revents : 0;
}

/*
 * Waiting for an interrupt without racing the hard handler.
 *
 * The file's read() and poll() unmask the line (or the device) when they
 * find no count.  Called right after a raise, while the handler is still
 * running on another CPU, that unmask can let the same interrupt be
 * counted twice (see proc_read's exclusive_poll_loop).  Tests about
 * something else wait through an edge-triggered epoll set made before the
 * raise instead: adding the file polls it once (claiming the line and
 * unmasking it); afterwards epoll polls it only after a wake-up, which
 * the handler does after counting.  Re-arm with a non-blocking read that
 * finds nothing, or by closing and reopening the set.
 */
static inline int pu_ep_open(int fd)
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

/* 1 when the file became readable, 0 on timeout, -errno. */
static inline int pu_ep_wait(int ep, int timeout_ms)
{
	struct epoll_event ev;
	int n = epoll_wait(ep, &ev, 1, timeout_ms);

	if (n < 0)
		return -errno;
	if (n && !(ev.events & EPOLLIN))
		return -EPROTO;
	return n;
}

/*
 * One raise / wait / read / ack cycle on @fd, in any mode: the count read
 * (1 expected), or -EEXIST (a count was already there), -ETIMEDOUT, -errno.
 */
static inline long pu_cycle(const struct edu *e, int fd)
{
	int ep = pu_ep_open(fd), r;
	long c;

	if (ep < 0)
		return ep;
	r = pu_ep_wait(ep, 0);
	if (r) {
		close(ep);
		return r < 0 ? r : -EEXIST;
	}
	edu_raise(e, 1);
	r = pu_ep_wait(ep, 2000);
	close(ep);
	if (r != 1) {
		edu_ack(e, 1);
		return r < 0 ? r : -ETIMEDOUT;
	}
	c = irq_read4(fd);
	edu_ack(e, 1);
	return c;
}

/* --- /proc and debugfs state of a line ------------------------------------ */

/* Read a whole (small) file, NUL-terminated; length or -errno. */
static inline long pu_read_file(const char *path, char *buf, size_t len);

/* Booted with threadirqs: handlers that may be threads are. */
static inline bool pu_threadirqs(void)
{
	char buf[512];

	return pu_read_file("/proc/cmdline", buf, sizeof(buf)) > 0 &&
	       strstr(buf, "threadirqs");
}

static inline long pu_read_file(const char *path, char *buf, size_t len)
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

/* The disable depth of the line ("ddepth:" in debugfs), or -errno. */
static inline int irq_ddepth(int irq)
{
	char path[96], buf[2048], *p;
	long n;
	unsigned int d;

	snprintf(path, sizeof(path), DEBUGFS_IRQS "/%d", irq);
	n = pu_read_file(path, buf, sizeof(buf));
	if (n < 0)
		return n;
	p = strstr(buf, "\nddepth:");
	if (!p || sscanf(p + 8, "%u", &d) != 1)
		return -EPROTO;
	return d;
}

/* /proc/irq/N/spurious: count and unhandled.  0 or -errno. */
static inline int irq_spurious(int irq, unsigned int *count, unsigned int *unhandled)
{
	char path[64], buf[256];
	long n;

	snprintf(path, sizeof(path), "/proc/irq/%d/spurious", irq);
	n = pu_read_file(path, buf, sizeof(buf));
	if (n < 0)
		return n;
	if (sscanf(buf, "count %u\nunhandled %u", count, unhandled) != 2)
		return -EPROTO;
	return 0;
}

/*
 * The line of /proc/interrupts for @irq: *total gets the sum of the
 * per-CPU counts, @actions (if not NULL) the action names ("a, b"),
 * after the chip and "hwirq-flow" fields.  0 or -errno (-ENOENT: no
 * line, which the kernel omits for a line without actions or counts).
 */
static inline int irq_stat(int irq, unsigned long long *total, char *actions, size_t alen)
{
	static char buf[65536];
	char *line, *save = NULL, *p, *end;
	long n = pu_read_file("/proc/interrupts", buf, sizeof(buf));

	if (n < 0)
		return n;
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		p = line;
		while (*p == ' ')
			p++;
		if (strtol(p, &end, 10) != irq || end == p || *end != ':')
			continue;
		p = end + 1;
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
	return -ENOENT;
}

/* Total interrupts of the line so far (0 when it has no line). */
static inline unsigned long long irq_total(int irq)
{
	unsigned long long t = 0;

	irq_stat(irq, &t, NULL, 0);
	return t;
}

/* Does the line of /proc/interrupts for @irq name @what? */
static inline bool irq_has_action(int irq, const char *what)
{
	unsigned long long t;
	char act[512];

	if (irq_stat(irq, &t, act, sizeof(act)))
		return false;
	return strstr(act, what) != NULL;
}

/* How many actions the line has (0 when none or no line). */
static inline int irq_nactions(int irq)
{
	unsigned long long t;
	char act[512], *p;
	int n;

	if (irq_stat(irq, &t, act, sizeof(act)) || !act[0])
		return 0;
	for (n = 1, p = act; (p = strstr(p, ", ")); p += 2)
		n++;
	return n;
}

/* The "user:<comm>" name of our action, for irq_has_action(). */
static inline const char *irq_user_name(void)
{
	static char name[32];
	char comm[20] = "";

	if (!name[0]) {
		pu_read_file("/proc/self/comm", comm, sizeof(comm));
		comm[strcspn(comm, "\n")] = 0;
		snprintf(name, sizeof(name), "user:%s", comm);
	}
	return name;
}

/* --- the edu device ----------------------------------------------------- */

/*
 * edu_open() a device, first unbinding it from any driver a failed
 * earlier test left it bound to (the sysfs "enable" write fails with
 * EBUSY while a driver is bound); then quiesce it: status 0, INTx
 * enabled in the Command register.  0 or -errno.
 */
static inline int edu_open_clean(struct edu *e, int slot)
{
	int ret = edu_open(e, slot);

	if (ret == -EBUSY) {
		edu_bind(e, NULL);
		ret = edu_open(e, slot);
	}
	if (ret)
		return ret;
	edu_ack(e, ~0u);
	return edu_set_intx(e, true);
}

/*
 * Clear what an earlier (failed) test may have left in QEMU's IO-APIC for
 * @e's line, when nobody else uses it: a level that went away while the
 * pin was shut down (a masked edge entry) stays latched there and fires
 * once the pin is started again.  Claim the line, toggle the device's
 * level (which resets the latch in level mode), drain, close.  The device
 * must be quiet (edu_open_clean()).  0 or -errno.
 */
static inline int pu_line_flush(const struct edu *e)
{
	int fd;

	if (irq_nactions(e->irq))
		return 0;
	fd = irq_open(e->irq, O_NONBLOCK);
	if (fd < 0)
		return fd;
	irq_read4(fd);
	edu_raise(e, 1);
	pu_poll(fd, POLLIN, 100);
	edu_ack(e, 1);
	pu_msleep(2);
	irq_read4(fd);
	close(fd);
	return 0;
}

/* Acknowledge everything (before closing files, in teardowns). */
static inline void edu_quiet(const struct edu *e)
{
	if (e->regs)
		edu_ack(e, ~0u);
}

/* Leave the device as edu_open_clean() found it; safe to call twice. */
static inline void edu_close_clean(struct edu *e)
{
	if (!e->regs)
		return;
	edu_ack(e, ~0u);
	edu_set_intx(e, true);
	edu_close(e);
}

/* Raise @bits on @e after @delay_ms, from a thread. */
struct pu_raiser {
	const struct edu *e;
	unsigned int delay_ms;
	uint32_t bits;
	uint64_t raised_ns;
	pthread_t th;
};

static inline void *pu_raiser_fn(void *arg)
{
	struct pu_raiser *r = arg;

	pu_msleep(r->delay_ms);
	r->raised_ns = pu_now_ns();
	edu_raise(r->e, r->bits);
	return NULL;
}

static inline int pu_raise_later(struct pu_raiser *r, const struct edu *e,
				 unsigned int delay_ms, uint32_t bits)
{
	r->e = e;
	r->delay_ms = delay_ms;
	r->bits = bits;
	r->raised_ns = 0;
	return -pthread_create(&r->th, NULL, pu_raiser_fn, r);
}

/* The Linux IRQ of @e's MSI vector, 0 if it has none, or -errno. */
static inline int pu_msi_vector(const struct edu *e)
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

/* --- uio ---------------------------------------------------------------- */

/* Open /dev/uioN of a device bound to uio_pci_generic: fd or -errno. */
static inline int pu_uio_open(const struct edu *e)
{
	char path[32];
	int idx = edu_uio_index(e), fd;

	if (idx < 0)
		return idx;
	snprintf(path, sizeof(path), "/dev/uio%d", idx);
	fd = open(path, O_RDWR | O_CLOEXEC | O_NONBLOCK);
	return fd < 0 ? -errno : fd;
}

/* Wait up to @timeout_ms for an event: the cumulative count, or -errno. */
static inline long pu_uio_wait(int fd, int timeout_ms)
{
	int32_t c;
	int r = pu_poll(fd, POLLIN, timeout_ms);

	if (r < 0)
		return r;
	if (!r)
		return -ETIMEDOUT;
	if (read(fd, &c, sizeof(c)) != sizeof(c))
		return -errno;
	return c;
}

/* The cumulative event count from sysfs (uio's "event"), or -errno. */
static inline long pu_uio_count(const struct edu *e)
{
	char path[64], buf[32];
	int idx = edu_uio_index(e);
	long n;

	if (idx < 0)
		return idx;
	snprintf(path, sizeof(path), "/sys/class/uio/uio%d/event", idx);
	n = pu_read_file(path, buf, sizeof(buf));
	return n < 0 ? n : strtol(buf, NULL, 10);
}

/* --- capabilities ------------------------------------------------------ */

static inline int caps_get(struct __user_cap_data_struct d[2])
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };

	return syscall(SYS_capget, &h, d) ? -errno : 0;
}

static inline int caps_set(struct __user_cap_data_struct d[2])
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };

	return syscall(SYS_capset, &h, d) ? -errno : 0;
}

static inline void cap_clear(struct __user_cap_data_struct d[2], int cap)
{
	d[CAP_TO_INDEX(cap)].effective &= ~CAP_TO_MASK(cap);
	d[CAP_TO_INDEX(cap)].permitted &= ~CAP_TO_MASK(cap);
	d[CAP_TO_INDEX(cap)].inheritable &= ~CAP_TO_MASK(cap);
}

/* --- thread state ------------------------------------------------------- */

/* The state letter of thread or process @tid (R, S, D, ...), or 0. */
static inline char pu_thread_state(pid_t tid)
{
	char path[64], buf[512], *p;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)tid);
	if (pu_read_file(path, buf, sizeof(buf)) <= 0)
		return 0;
	p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : 0;
}

/* The syscall number thread @tid is in (/proc/.../syscall), or -1. */
static inline long pu_thread_syscall(pid_t tid)
{
	char path[64], buf[256];

	snprintf(path, sizeof(path), "/proc/%d/syscall", (int)tid);
	if (pu_read_file(path, buf, sizeof(buf)) <= 0 || buf[0] < '0' || buf[0] > '9')
		return -1;
	return strtol(buf, NULL, 10);
}

/*
 * Wait up to @timeout_ms until thread (or process) @tid sleeps (S) in
 * syscall @nr
 * (when /proc/.../syscall is there; else sleeping is enough).
 */
static inline bool pu_wait_blocked(pid_t tid, long nr, unsigned int timeout_ms)
{
	uint64_t t0 = pu_now_ns();

	do {
		if (pu_thread_state(tid) == 'S') {
			long sc = pu_thread_syscall(tid);

			if (sc == nr || sc == -1)
				return true;
		}
		pu_msleep(1);
	} while (pu_ms_since(t0) < timeout_ms);
	return false;
}

#endif
