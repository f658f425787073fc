/* SPDX-License-Identifier: MIT */
/* uli_util.h - helpers of the ULI tests: CPUs, contexts, raising. */
#ifndef ULI_UTIL_H
#define ULI_UTIL_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "edu.h"
#include "uli.h"

/*
 * The full count of a test (100,000 raises), or ULI_TEST_N; part scales
 * it down for the slower cases (a fork per step, say): full / part.
 */
static inline uint64_t uu_test_n(uint64_t part)
{
	const char *v = getenv("ULI_TEST_N");
	uint64_t n = v ? strtoull(v, NULL, 0) : 100000;

	return n / part ? n / part : 1;
}

static inline uint64_t uu_rdtsc(void)
{
	uint32_t lo, hi;

	__asm__ volatile ("rdtsc" : "=a" (lo), "=d" (hi));
	return (uint64_t)hi << 32 | lo;
}

static inline uint64_t uu_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* TSC cycles per millisecond, against CLOCK_MONOTONIC over 50 ms. */
static inline uint64_t uu_tsc_per_ms(void)
{
	uint64_t t0 = uu_now_ns(), c0 = uu_rdtsc(), t1, c1;

	usleep(50000);
	t1 = uu_now_ns();
	c1 = uu_rdtsc();
	return (c1 - c0) * 1000000 / (t1 - t0);
}

/* The CPU an interrupt line is delivered to (its effective affinity). */
static inline int uu_irq_cpu(int irq)
{
	char path[64];
	int cpu = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/irq/%d/effective_affinity_list", irq);
	f = fopen(path, "r");
	if (f) {
		if (fscanf(f, "%d", &cpu) != 1)
			cpu = 0;
		fclose(f);
	}
	return cpu;
}

/* Have an interrupt delivered to cpu: 0, or -1. */
static inline int uu_set_irq_cpu(int irq, int cpu)
{
	char path[64], buf[16];
	int fd, n, ret = -1;

	snprintf(path, sizeof(path), "/proc/irq/%d/smp_affinity_list", irq);
	fd = open(path, O_WRONLY);
	if (fd < 0)
		return -1;
	n = snprintf(buf, sizeof(buf), "%d\n", cpu);
	if (write(fd, buf, n) == n)
		ret = 0;
	close(fd);
	return ret;
}

/* The line of a registration: ULI_irq(), or for MSI the device's vector. */
static inline int uu_uli_irq(void *uli, const struct edu *e)
{
	char path[96];
	struct dirent *d;
	int irq = ULI_irq(uli);
	DIR *dir;

	if (irq >= 0)
		return irq;
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/msi_irqs", e->bdf);
	dir = opendir(path);
	if (!dir)
		return -1;
	while ((d = readdir(dir)))
		if (d->d_name[0] != '.')
			irq = atoi(d->d_name);
	closedir(dir);
	return irq;
}

static inline int uu_ncpus(void)
{
	return (int)sysconf(_SC_NPROCESSORS_ONLN);
}

static inline int uu_pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set);
}

/* Spin until *counter reaches want; false after timeout_ms. */
static inline bool uu_wait_count(volatile uint64_t *counter, uint64_t want,
				 unsigned int timeout_ms)
{
	uint64_t end = uu_now_ns() + (uint64_t)timeout_ms * 1000000u;
	unsigned int i = 0;

	while (*counter < want)
		if (++i % 1024 == 0 && uu_now_ns() > end)
			return false;
	return true;
}

/* ULI_register_pci()'s flags, or this: ULI_register_mmio() with edu_uli_regs. */
#define UU_MMIO	0x1000

/* Register @e's interrupt as @how says: ULI_INTX, ULI_MSI or UU_MMIO. */
static inline void *uu_register(const struct edu *e, uli_func_t func, void *arg,
				int nsemas, void *stack, int stacksize, int how)
{
	if (how == UU_MMIO)
		return ULI_register_mmio(e->bdf, &edu_uli_regs, func, arg, nsemas,
					 stack, stacksize);
	return ULI_register_pci(e->bdf, func, arg, nsemas, stack, stacksize, how);
}

/* A child pinned to cpu running fn forever; kill it with uu_stop(). */
static inline pid_t uu_spawn(int cpu, void (*fn)(void))
{
	pid_t pid = fork();

	if (pid == 0) {
		/* Dies with its test, even one ended by a failed ASSERT. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		uu_pin(cpu);
		fn();
		_exit(0);
	}
	return pid;
}

static inline void uu_stop(pid_t pid)
{
	if (pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
}

/* voluntary_ctxt_switches + nonvoluntary_ctxt_switches of a task. */
static inline long uu_ctxt_switches(pid_t pid, pid_t tid)
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

/* Does ULI_MODE select the direct upcall (unset, empty or "upcall")? */
static inline bool uu_upcall_mode(void)
{
	const char *m = getenv("ULI_MODE");

	return !m || !*m || !strcmp(m, "upcall");
}

/*
 * This process's /dev/uli descriptor (the one of its registration, for
 * the raw ioctls of <linux/uli.h>), or -1: none, or more than one.
 */
static inline int uu_uli_fd(void)
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

/* Write s to a file opened with O_WRONLY | flags: 0 or -errno. */
static inline int uu_write_file_flags(const char *path, const char *s, int flags)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC | flags), ret = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, s, strlen(s)) < 0)
		ret = -errno;
	close(fd);
	return ret;
}

/* Write s to a sysfs or proc file: 0 or -errno. */
static inline int uu_write_file(const char *path, const char *s)
{
	return uu_write_file_flags(path, s, 0);
}

/*
 * Raise e n times, each handled (*handled counted up by the handler)
 * within timeout_ms before the next: how many were.
 */
static inline uint64_t uu_raise_each(const struct edu *e, volatile uint64_t *handled,
				     uint64_t n, unsigned int timeout_ms)
{
	uint64_t i;

	for (i = 0; i < n; i++) {
		uint64_t want = *handled + 1;

		edu_raise(e, 1);
		if (!uu_wait_count(handled, want, timeout_ms))
			break;
	}
	return i;
}

/* Registrations listed in /sys/kernel/debug/uli, or -1. */
static inline int uu_registrations(void)
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

/* The number after "Key:" in a "Key: N kB" file (meminfo, status), or -1. */
static inline long uu_field_kb(const char *path, const char *key)
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

/*
 * Empty every slab cache's per-CPU and partial slabs, and KASAN's
 * quarantine of freed objects, which otherwise keep Slab some hundred
 * kB above what is in use, differently from one reading to the next.
 */
static inline void uu_shrink_slabs(void)
{
	char path[300];
	struct dirent *d;
	DIR *dir = opendir("/sys/kernel/slab");

	if (!dir)
		return;
	while ((d = readdir(dir)))
		if (d->d_name[0] != '.') {
			snprintf(path, sizeof(path), "/sys/kernel/slab/%s/shrink", d->d_name);
			uu_write_file(path, "1\n");
		}
	closedir(dir);
}

/* A /proc/meminfo value in kB, after caches were dropped, or -1. */
static inline long uu_meminfo_kb(const char *key)
{
	uu_write_file("/proc/sys/vm/drop_caches", "3\n");
	uu_shrink_slabs();
	return uu_field_kb("/proc/meminfo", key);
}

/*
 * The first "key : value" line of /proc/cpuinfo whose key starts with
 * @key: does its value have @word as a whole word?
 */
static inline bool uu_cpuinfo_has(const char *key, const char *word)
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

/* A field of /proc/<pid>/status (0: self) in kB, or -1. */
static inline long uu_status_kb(pid_t pid, const char *key)
{
	char path[64];

	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	else
		snprintf(path, sizeof(path), "/proc/self/status");
	return uu_field_kb(path, key);
}

#endif
