// SPDX-License-Identifier: MIT
/*
 * uli_pinned - the memory a handler writes, and what fork costs:
 *
 *  - fork_cost: a 256 MiB owner (4 KiB pages) with 1 MiB pinned for its
 *    handler forks children that exit at once in no more than twice the
 *    time it took before registering (the kernel copies the pinned pages
 *    for a child, nothing else), its memory is back when they are gone,
 *    and the handler writes the pinned buffer after the forks, none
 *    aborted; fork_cost_thp: the same in huge pages, the ratio logged;
 *  - sealed: a pinned range cannot be unmapped, moved, reprotected,
 *    mapped over or discarded (EPERM), its neighbours in the same mapping
 *    can; smaps flags it "ul"; a fork child's copy is not sealed; after
 *    ULI_destroy() it is ordinary memory again;
 *  - overlapping: two registrations pin overlapping ranges: the overlap
 *    stays sealed until both have ended;
 *  - userfaultfd: a pinned range cannot be registered for write-protect
 *    tracking (EINVAL), and a range registered so cannot be pinned (EBUSY).
 */
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "kselftest_harness.h"
#include "helpers.h"

#define MB		(1024UL * 1024)
#define OWNER_SIZE	(256 * MB)
#define PINNED_SIZE	(1 * MB)
#define FORKS		5

#ifndef MADV_DONTNEED_LOCKED
#define MADV_DONTNEED_LOCKED	24
#endif

static struct edu e, e2;
static volatile uint64_t handled;
static uint64_t *pinned_buf;		/* pinned with ULI_pin() */

static void handler(void *arg)
{
	(void)arg;
	edu_ack(&e, edu_status(&e));
	if (pinned_buf)
		pinned_buf[(handled % (PINNED_SIZE / 4096)) * 512]++;
	handled++;
}

static void nop_handler(void *arg)
{
	(void)arg;
}

/* Microseconds for the fastest of FORKS forks of a child that exits. */
static uint64_t fork_us(void)
{
	uint64_t best = UINT64_MAX;
	int i, status;

	for (i = 0; i < FORKS; i++) {
		uint64_t t0 = t_now_ns(), dt;
		pid_t pid = fork();

		if (pid == 0)
			_exit(0);
		if (pid < 0 || waitpid(pid, &status, 0) != pid)
			return 0;
		dt = (t_now_ns() - t0) / 1000;
		if (dt < best)
			best = dt;
	}
	return best;
}

static void *map(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* Is [p, p + len) in an smaps entry of its own flagged "ul"? */
static bool smaps_ul(void *p)
{
	char line[512], want[32];
	bool in = false, found = false;
	FILE *f = fopen("/proc/self/smaps", "r");

	if (!f)
		return false;
	snprintf(want, sizeof(want), "%lx-", (unsigned long)p);
	while (fgets(line, sizeof(line), f)) {
		if (strchr(line, '-') && strchr(line, ' ') > strchr(line, '-') &&
		    !strncmp(line, want, strlen(want)))
			in = true;
		else if (in && !strncmp(line, "VmFlags:", 8)) {
			found = strstr(line, " ul") != NULL;
			break;
		}
	}
	fclose(f);
	return found;
}

/* Every way to take [p, p + len) from under the handler fails with EPERM. */
static int sealed_errors(struct __test_metadata *_metadata, char *p, size_t len)
{
	int bad = 0;

#define REFUSED(failed) do {						\
		errno = 0;						\
		if (!(failed) || errno != EPERM) {			\
			TH_LOG("%s: not EPERM (%s)", #failed, strerror(errno)); \
			bad++;						\
		}							\
	} while (0)
	REFUSED(munmap(p, len) == -1);
	REFUSED(munmap(p + 4096, 4096) == -1);
	REFUSED(mprotect(p, len, PROT_READ) == -1);
	REFUSED(madvise(p, len, MADV_DONTNEED) == -1);
	REFUSED(madvise(p, 4096, MADV_DONTNEED_LOCKED) == -1);
	REFUSED(madvise(p, len, MADV_FREE) == -1);
	REFUSED(madvise(p, len, MADV_DONTFORK) == -1);
	REFUSED(mremap(p, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, p + 64 * MB) == MAP_FAILED);
	REFUSED(mmap(p, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) ==
		MAP_FAILED);
#undef REFUSED
	return bad;
}

FIXTURE(pn) {
	void *uli, *uli2;
	char *mem;
	size_t len;
};

FIXTURE_SETUP(pn)
{
	ASSERT_EQ(0, edu_open_clean(&e, EDU_SLOT_C));
	self->uli = self->uli2 = NULL;
	self->mem = NULL;
	e2.regs = NULL;
}

FIXTURE_TEARDOWN(pn)
{
	if (self->uli2)
		ULI_destroy(self->uli2);
	if (self->uli)
		ULI_destroy(self->uli);
	pinned_buf = NULL;
	if (self->mem)
		munmap(self->mem, self->len);
	if (e2.regs)
		edu_close_clean(&e2);
	edu_close_clean(&e);
}

/*
 * Fork a 256 MiB owner before registering and with 1 MiB pinned; @thp:
 * its memory in transparent huge pages, else in 4 KiB pages.  The ratio.
 */
static double fork_cost(struct __test_metadata *_metadata, FIXTURE_DATA(pn) *self, bool thp)
{
	uint64_t before_us, with_us, sum = 0;
	long avail0, avail1;
	struct uli_stats st;
	size_t i;

	self->len = OWNER_SIZE;
	self->mem = map(self->len);
	if (!self->mem) {
		TH_LOG("mmap: %s", strerror(errno));
		return -1;
	}
	/* EINVAL without THP (PREEMPT_RT has none): 4 KiB pages then. */
	if (madvise(self->mem, self->len, thp ? MADV_HUGEPAGE : MADV_NOHUGEPAGE) &&
	    (thp || errno != EINVAL)) {
		TH_LOG("madvise: %s", strerror(errno));
		return thp && errno == EINVAL ? 0 : -1;
	}
	memset(self->mem, 1, self->len);
	before_us = fork_us();

	self->uli = ULI_register_pci(e.bdf, handler, NULL, 0, NULL, 0, ULI_INTX);
	if (!self->uli) {
		TH_LOG("register: %s", strerror(errno));
		return -1;
	}
	if (ULI_pin(self->uli, self->mem, PINNED_SIZE)) {
		TH_LOG("ULI_pin: %s", strerror(errno));
		return -1;
	}
	pinned_buf = (uint64_t *)self->mem;
	memset(pinned_buf, 0, PINNED_SIZE);
	if (t_raise_each(&e, &handled, 3, 2000) != 3) {
		TH_LOG("3 raises not handled");
		return -1;
	}

	avail0 = t_meminfo_kb("MemAvailable");
	with_us = fork_us();
	/* The children's pages and page tables are freed lazily (RCU, per-CPU lists). */
	for (i = 0; i < 30; i++) {
		avail1 = t_meminfo_kb("MemAvailable");
		if (avail0 - avail1 <= 16 * 1024)
			break;
		t_msleep(100);
	}
	TH_LOG("fork of a %lu MiB owner in %s pages: %llu us before registering, %llu us "
	       "with %lu MiB pinned (%.2fx); MemAvailable %ld kB before the forks, %ld kB after",
	       OWNER_SIZE / MB, thp ? "huge" : "4 KiB", (unsigned long long)before_us,
	       (unsigned long long)with_us, PINNED_SIZE / MB,
	       before_us ? (double)with_us / before_us : 0.0, avail0, avail1);
	/* The children's copies are gone with them (slack: page tables, caches). */
	EXPECT_LE(avail0 - avail1, 16 * 1024);

	/* The handler's writes after the forks: in our buffer, none aborted. */
	EXPECT_EQ(20, t_raise_each(&e, &handled, 20, 2000));
	for (i = 0; i < PINNED_SIZE / 4096; i++)
		sum += pinned_buf[i * 512];
	EXPECT_EQ(handled, sum);
	EXPECT_EQ(0, ULI_get_stats(self->uli, &st));
	EXPECT_EQ(0, t_aborts(&st));
	return before_us && with_us ? (double)with_us / before_us : -1;
}

/* The page tables are the fork's cost; the pinned MiB's copy adds to it. */
TEST_F_TIMEOUT(pn, fork_cost, 300)
{
	double ratio = fork_cost(_metadata, self, false);

	ASSERT_LT(0, ratio);
	EXPECT_GE(2.0, ratio);
}

/*
 * In huge pages a fork copies 128 page table entries: the copy of the
 * pinned MiB is most of the cost then.  Measured, not bounded.
 */
TEST_F_TIMEOUT(pn, fork_cost_thp, 300)
{
	double ratio = fork_cost(_metadata, self, true);

	if (ratio == 0)
		SKIP(return, "no transparent huge pages in this kernel");
	ASSERT_LT(0, ratio);
}

TEST_F(pn, sealed)
{
	char *p;
	int status;
	pid_t pid;

	if (!t_upcall_mode())
		SKIP(return, "the proc method pins nothing in the kernel");
	self->len = 8 * MB;
	self->mem = map(self->len);
	ASSERT_NE(NULL, self->mem);
	p = self->mem + 2 * MB;
	self->uli = ULI_register_pci(e.bdf, handler, NULL, 0, NULL, 0, ULI_INTX);
	ASSERT_NE(NULL, self->uli) TH_LOG("register: %s", strerror(errno));
	ASSERT_EQ(0, ULI_pin(self->uli, p, PINNED_SIZE));
	pinned_buf = (uint64_t *)p;

	EXPECT_EQ(0, sealed_errors(_metadata, p, PINNED_SIZE));
	EXPECT_TRUE(smaps_ul(p));
	EXPECT_FALSE(smaps_ul(self->mem));
	/* The rest of the mapping is the owner's to change. */
	/* DONTNEED_LOCKED: registering mlock()ed everything, as root. */
	EXPECT_EQ(0, madvise(self->mem, MB, MADV_DONTNEED_LOCKED));
	EXPECT_EQ(0, mprotect(p + PINNED_SIZE, MB, PROT_READ));
	EXPECT_EQ(0, munmap(p + PINNED_SIZE + MB, MB));
	/* Still the handler's: it writes there. */
	ASSERT_EQ(5, t_raise_each(&e, &handled, 5, 2000));
	EXPECT_EQ(1, pinned_buf[512]);

	/* A child's copy is its own, not sealed. */
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0)
		_exit(smaps_ul(p) || munmap(p, PINNED_SIZE) ? 1 : 0);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);

	ASSERT_EQ(0, ULI_destroy(self->uli));
	self->uli = NULL;
	pinned_buf = NULL;
	EXPECT_FALSE(smaps_ul(p));
	EXPECT_EQ(0, madvise(p, PINNED_SIZE, MADV_DONTNEED_LOCKED));
	EXPECT_EQ(0, munmap(p, PINNED_SIZE));
}

TEST_F(pn, overlapping)
{
	char *p;

	if (!t_upcall_mode())
		SKIP(return, "the proc method pins nothing in the kernel");
	ASSERT_EQ(0, edu_open_clean(&e2, EDU_SLOT_A));
	self->len = 4 * MB;
	self->mem = map(self->len);
	ASSERT_NE(NULL, self->mem);
	p = self->mem + MB;
	memset(self->mem, 0, self->len);
	self->uli = ULI_register_pci(e.bdf, nop_handler, NULL, 0, NULL, 0, ULI_INTX);
	ASSERT_NE(NULL, self->uli) TH_LOG("register: %s", strerror(errno));
	self->uli2 = ULI_register_pci(e2.bdf, nop_handler, NULL, 0, NULL, 0, ULI_INTX);
	ASSERT_NE(NULL, self->uli2) TH_LOG("register: %s", strerror(errno));
	/* [p, p + 2M) and [p + 1M, p + 3M): they overlap in [p + 1M, p + 2M). */
	ASSERT_EQ(0, ULI_pin(self->uli, p, 2 * MB));
	ASSERT_EQ(0, ULI_pin(self->uli2, p + MB, 2 * MB));
	/* The same range twice in one registration. */
	ASSERT_EQ(0, ULI_pin(self->uli, p, MB));

	ASSERT_EQ(0, ULI_destroy(self->uli));
	self->uli = NULL;
	EXPECT_EQ(0, madvise(p, MB, MADV_DONTNEED_LOCKED)) TH_LOG("first registration's alone");
	EXPECT_EQ(0, sealed_errors(_metadata, p + MB, MB)) TH_LOG("overlap, after the first");
	EXPECT_EQ(0, sealed_errors(_metadata, p + 2 * MB, MB)) TH_LOG("second's alone");

	ASSERT_EQ(0, ULI_destroy(self->uli2));
	self->uli2 = NULL;
	EXPECT_EQ(0, mprotect(p, 3 * MB, PROT_READ));
	EXPECT_EQ(0, munmap(p, 3 * MB));
}

TEST_F(pn, userfaultfd)
{
	struct uffdio_api api = { .api = UFFD_API, .features = 0 };
	struct uffdio_register reg;
	char *p;
	int uffd;

	if (!t_upcall_mode())
		SKIP(return, "the proc method pins nothing in the kernel");
	uffd = syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	ASSERT_LE(0, uffd) TH_LOG("userfaultfd: %s", strerror(errno));
	ASSERT_EQ(0, ioctl(uffd, UFFDIO_API, &api));
	self->len = 4 * MB;
	self->mem = map(self->len);
	ASSERT_NE(NULL, self->mem);
	memset(self->mem, 0, self->len);
	p = self->mem;
	self->uli = ULI_register_pci(e.bdf, nop_handler, NULL, 0, NULL, 0, ULI_INTX);
	ASSERT_NE(NULL, self->uli) TH_LOG("register: %s", strerror(errno));
	ASSERT_EQ(0, ULI_pin(self->uli, p, MB));

	memset(&reg, 0, sizeof(reg));
	reg.range.start = (unsigned long)p;
	reg.range.len = MB;
	reg.mode = UFFDIO_REGISTER_MODE_WP;
	errno = 0;
	EXPECT_EQ(-1, ioctl(uffd, UFFDIO_REGISTER, &reg));
	EXPECT_EQ(EINVAL, errno);

	/* Write-protect tracking first: then it cannot be pinned. */
	reg.range.start = (unsigned long)(p + 2 * MB);
	ASSERT_EQ(0, ioctl(uffd, UFFDIO_REGISTER, &reg)) TH_LOG("%s", strerror(errno));
	errno = 0;
	EXPECT_EQ(-1, ULI_pin(self->uli, p + 2 * MB, MB));
	EXPECT_EQ(EBUSY, errno);
	close(uffd);
}

TEST_HARNESS_MAIN
