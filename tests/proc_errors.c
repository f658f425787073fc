// SPDX-License-Identifier: GPL-2.0
/*
 * proc_errors - the error returns of /proc/irq/N/irq, and its poll,
 * select and epoll readiness, on edu@5.
 *
 * EINVAL (short reads, bad descriptions, an MSI vector), EAGAIN, EBUSY (second opener,
 * line held by a kernel driver, line held by a non-shared action, second
 * claim), EPERM / EACCES (capabilities and file mode), EINTR, ENODEV,
 * ENOTTY, EFAULT; after each failure the file still works.
 */
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <termios.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <linux/capability.h>

#include "kselftest_harness.h"
#include "helpers.h"

static void null_handler(void *arg)
{
	(void)arg;
}

FIXTURE(err) {
	struct edu e;
	int fd, fd2, epfd;
	bool bound;
};

FIXTURE_SETUP(err)
{
	int ret;

	self->fd = self->fd2 = self->epfd = -1;
	self->bound = false;
	ret = edu_open_clean(&self->e, EDU_SLOT_C);
	ASSERT_EQ(0, ret) TH_LOG("edu@%d: %s", EDU_SLOT_C, strerror(-ret));
	ASSERT_GT(self->e.irq, 0);
	ret = t_line_flush(&self->e);
	ASSERT_EQ(0, ret) TH_LOG("flush irq %d: %s", self->e.irq, strerror(-ret));
}

FIXTURE_TEARDOWN(err)
{
	edu_quiet(&self->e);
	t_irq_close(&self->epfd);
	t_irq_close(&self->fd2);
	t_irq_close(&self->fd);
	if (self->bound)
		edu_bind(&self->e, NULL);
	edu_close_clean(&self->e);
}

/* A race-free raise / wait / read / ack cycle: the count (1) or -errno. */
#define cycle(e, fd) t_irq_cycle(e, fd)

/* --- reads ---------------------------------------------------------------- */

TEST_F(err, short_read_einval)
{
	char buf[8];

	self->fd = t_irq_open(self->e.irq, 0);
	ASSERT_LE(0, self->fd);
	errno = 0;
	EXPECT_EQ(-1, read(self->fd, buf, 3));
	EXPECT_EQ(EINVAL, errno);
	errno = 0;
	EXPECT_EQ(-1, read(self->fd, buf, 0));
	EXPECT_EQ(EINVAL, errno);
	errno = 0;
	EXPECT_EQ(-1, read(self->fd, buf, 1));
	EXPECT_EQ(EINVAL, errno);
	/* Checked before the claim: nothing claimed. */
	EXPECT_FALSE(t_irq_has_action(self->e.irq, t_irq_user_name()));

	/* Usable: the read claims the line and counts. */
	ASSERT_EQ(1, cycle(&self->e, self->fd));
	/* And short reads still fail once claimed, with nothing consumed. */
	edu_raise(&self->e, 1);
	ASSERT_EQ(POLLIN, t_poll(self->fd, POLLIN, 2000));
	errno = 0;
	EXPECT_EQ(-1, read(self->fd, buf, 3));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(1, t_irq_read4(self->fd));
	edu_ack(&self->e, 1);
}

TEST_F(err, nonblock_eagain)
{
	struct irq_user_event ev;

	self->fd = t_irq_open(self->e.irq, O_NONBLOCK);
	ASSERT_LE(0, self->fd);
	EXPECT_EQ(-EAGAIN, t_irq_read4(self->fd));
	EXPECT_EQ(-EAGAIN, t_irq_read_ev(self->fd, &ev));
	/* Claimed exclusively, unmasked. */
	EXPECT_TRUE(t_irq_has_action(self->e.irq, t_irq_user_name()));
	EXPECT_EQ(0, t_irq_ddepth(self->e.irq));
	EXPECT_EQ(1, cycle(&self->e, self->fd));
	EXPECT_EQ(-EAGAIN, t_irq_read4(self->fd));
}

/* An address that is never mapped (below mmap_min_addr), hidden from gcc. */
static void *volatile bad_ptr = (void *)8;

/* A bad buffer: EFAULT, and the interrupts go to the next read. */
TEST_F(err, read_efault_keeps_count)
{
	self->fd = t_irq_open(self->e.irq, 0);
	ASSERT_LE(0, self->fd);
	self->epfd = t_ep_open(self->fd);
	ASSERT_LE(0, self->epfd);
	edu_raise(&self->e, 1);
	ASSERT_EQ(1, t_ep_wait(self->epfd, 2000));
	errno = 0;
	EXPECT_EQ(-1, read(self->fd, bad_ptr, 4));
	EXPECT_EQ(EFAULT, errno);
	errno = 0;
	EXPECT_EQ(-1, read(self->fd, bad_ptr, 8));
	EXPECT_EQ(EFAULT, errno);
	EXPECT_EQ(POLLIN, t_poll(self->fd, POLLIN, 0));
	EXPECT_EQ(1, t_irq_read4(self->fd));
	edu_ack(&self->e, 1);
}

/* --- opening ------------------------------------------------------------ */

TEST_F(err, second_open_ebusy)
{
	self->fd = t_irq_open(self->e.irq, 0);
	ASSERT_LE(0, self->fd);
	EXPECT_EQ(-EBUSY, t_irq_open(self->e.irq, 0));
	EXPECT_EQ(-EBUSY, t_irq_open(self->e.irq, O_NONBLOCK));
	/* Still busy once claimed. */
	ASSERT_EQ(1, cycle(&self->e, self->fd));
	EXPECT_EQ(-EBUSY, t_irq_open(self->e.irq, 0));
	/* The first file is not disturbed by the failed opens. */
	ASSERT_EQ(1, cycle(&self->e, self->fd));
	t_irq_close(&self->fd);

	self->fd = t_irq_open(self->e.irq, 0);
	ASSERT_LE(0, self->fd) TH_LOG("reopen: %s", strerror(-self->fd));
	ASSERT_EQ(1, cycle(&self->e, self->fd));
}

/* uio_pci_generic holds the line (shared): open works, the exclusive claim not. */
TEST_F(err, uio_holds_line)
{
	struct irq_user_event ev;
	int ret;

	ret = edu_bind(&self->e, "uio_pci_generic");
	ASSERT_EQ(0, ret) TH_LOG("bind: %s", strerror(-ret));
	self->bound = true;
	ASSERT_TRUE(t_irq_has_action(self->e.irq, "uio_pci_generic"));

	self->fd = t_irq_open(self->e.irq, 0);
	ASSERT_LE(0, self->fd) TH_LOG("open: %s", strerror(-self->fd));
	EXPECT_EQ(-EBUSY, t_irq_read4(self->fd));
	EXPECT_EQ(-EBUSY, t_irq_read_ev(self->fd, &ev));
	EXPECT_EQ(POLLERR, t_poll(self->fd, POLLIN, 0) & (POLLERR | POLLIN));
	EXPECT_EQ(POLLERR, t_poll(self->fd, POLLIN, 100) & (POLLERR | POLLIN));
	EXPECT_FALSE(t_irq_has_action(self->e.irq, t_irq_user_name()));
	/* uio's line is left alone. */
	EXPECT_EQ(0, t_irq_ddepth(self->e.irq));
	t_irq_close(&self->fd);

	ASSERT_EQ(0, edu_bind(&self->e, NULL));
	self->bound = false;
	ASSERT_EQ(0, edu_set_intx(&self->e, true));
	self->fd = t_irq_open(self->e.irq, 0);
	ASSERT_LE(0, self->fd);
	EXPECT_EQ(1, cycle(&self->e, self->fd));
}

/* Our exclusive claim keeps a sharing driver out; the file keeps working. */
TEST_F(err, exclusive_blocks_uio)
{
	int ret;

	self->fd = t_irq_open(self->e.irq, 0);
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(1, cycle(&self->e, self->fd));
	ret = edu_bind(&self->e, "uio_pci_generic");
	if (!ret)
		self->bound = true;
	EXPECT_NE(0, ret) TH_LOG("uio_pci_generic bound to an exclusively claimed line");
	EXPECT_FALSE(t_irq_has_action(self->e.irq, "uio_pci_generic"));
	EXPECT_EQ(1, t_irq_nactions(self->e.irq));
	/* Still masked after our read, as before the failed probe. */
	EXPECT_EQ(1, t_irq_ddepth(self->e.irq));
	EXPECT_EQ(1, cycle(&self->e, self->fd));
	EXPECT_EQ(1, cycle(&self->e, self->fd));
	EXPECT_EQ(0, t_poll(self->fd, POLLIN, 0));
	EXPECT_EQ(0, t_irq_ddepth(self->e.irq));
}

/* A line whose action is not shared (the timer's) cannot be opened. */
TEST_F(err, nonshared_line_ebusy)
{
	char act[512];
	unsigned long long t;
	int irq, found = -1;

	for (irq = 0; irq < 16 && found < 0; irq++)
		if (!t_irq_stat(irq, &t, act, sizeof(act)) && !strcmp(act, "timer"))
			found = irq;
	if (found < 0)
		SKIP(return, "no line held by the timer alone");
	EXPECT_EQ(-EBUSY, t_irq_open(found, 0)) TH_LOG("irq %d", found);
	EXPECT_EQ(-EBUSY, t_irq_open(found, O_NONBLOCK)) TH_LOG("irq %d", found);
	/* And our own line is not blocked by that. */
	self->fd = t_irq_open(self->e.irq, 0);
	ASSERT_LE(0, self->fd);
}

/*
 * A vector of a device's MSI is not a line: it belongs to whoever set up
 * the MSI, which may free it under a reader.  A debug kernel warned in
 * __irq_startup() when a reader (the fuzzer's, on irq 24) enabled a
 * vector whose MSI setup had been torn down meanwhile.  Refused at
 * open(), also while its owner holds it (EINVAL, before the EBUSY of a
 * line held by another).
 */
TEST_F(err, msi_vector_einval)
{
	void *uli;
	int vec;

	uli = ULI_register_pci(self->e.bdf, null_handler, NULL, 0, NULL, 0, ULI_MSI);
	if (!uli && (errno == ENODEV || errno == ENOENT))
		SKIP(return, "no /dev/uli");
	ASSERT_NE(NULL, uli) TH_LOG("ULI_register_pci(ULI_MSI): %s", strerror(errno));
	vec = t_msi_irq(&self->e);
	ASSERT_LT(0, vec) TH_LOG("%s's MSI vector: %s", self->e.bdf,
				 vec ? strerror(-vec) : "none");
	EXPECT_EQ(-EINVAL, t_irq_open(vec, 0)) TH_LOG("irq %d", vec);
	EXPECT_EQ(0, ULI_destroy(uli));
}

/* --- privileges ----------------------------------------------------------- */

static void cap_only(struct __user_cap_data_struct d[2], const int *caps, int n)
{
	int i;

	memset(d, 0, 2 * sizeof(*d));
	for (i = 0; i < n; i++) {
		d[CAP_TO_INDEX(caps[i])].effective |= CAP_TO_MASK(caps[i]);
		d[CAP_TO_INDEX(caps[i])].permitted |= CAP_TO_MASK(caps[i]);
	}
}

#define CHILD_SETUP_FAILED	200

/*
 * In a child: become @uid (if not 0) keeping exactly @caps (n >= 0; with
 * n < 0 keep what setuid() leaves), or stay root and drop @drop (if >= 0);
 * then open the file.  Returns the child's verdict: 0 opened, an errno,
 * or CHILD_SETUP_FAILED.
 */
static int open_as(int irq, uid_t uid, const int *caps, int n, int drop)
{
	struct __user_cap_data_struct d[2];
	int status, fd;
	pid_t pid = fork();

	if (pid < 0)
		return CHILD_SETUP_FAILED;
	if (pid == 0) {
		if (uid) {
			if (n >= 0 && prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0))
				_exit(CHILD_SETUP_FAILED);
			if (setgroups(0, NULL) || setgid(uid) || setuid(uid))
				_exit(CHILD_SETUP_FAILED);
			if (getuid() != uid || geteuid() != uid)
				_exit(CHILD_SETUP_FAILED);
			if (n >= 0) {
				cap_only(d, caps, n);
				if (t_caps_set(d))
					_exit(CHILD_SETUP_FAILED + 1);
			}
		}
		if (drop >= 0) {
			if (t_caps_get(d))
				_exit(CHILD_SETUP_FAILED + 2);
			t_cap_clear(d, drop);
			if (t_caps_set(d))
				_exit(CHILD_SETUP_FAILED + 3);
			/* Make sure it is really gone. */
			if (t_caps_get(d) || (d[CAP_TO_INDEX(drop)].effective & CAP_TO_MASK(drop)))
				_exit(CHILD_SETUP_FAILED + 4);
		}
		fd = t_irq_open(irq, 0);
		_exit(fd < 0 ? -fd : 0);
	}
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return CHILD_SETUP_FAILED;
	return WEXITSTATUS(status);
}

/* Root without CAP_SYS_RAWIO: EPERM. */
TEST_F(err, no_rawio_eperm)
{
	EXPECT_EQ(EPERM, open_as(self->e.irq, 0, NULL, 0, CAP_SYS_RAWIO));
	/* Dropping another capability does not matter. */
	EXPECT_EQ(0, open_as(self->e.irq, 0, NULL, 0, CAP_NET_ADMIN));
	/* Nothing left behind by the child: we can open. */
	self->fd = t_irq_open(self->e.irq, 0);
	ASSERT_LE(0, self->fd);
	EXPECT_EQ(1, cycle(&self->e, self->fd));
}

/* uid 1000 without capabilities: the 0600 root file says EACCES. */
TEST_F(err, uid1000_eacces)
{
	EXPECT_EQ(EACCES, open_as(self->e.irq, 1000, NULL, -1, -1));
}

/* uid 1000 with CAP_DAC_OVERRIDE but not CAP_SYS_RAWIO: EPERM. */
TEST_F(err, uid1000_dac_override_eperm)
{
	static const int dac[] = { CAP_DAC_OVERRIDE };
	static const int dac_rawio[] = { CAP_DAC_OVERRIDE, CAP_SYS_RAWIO };
	static const int rawio[] = { CAP_SYS_RAWIO };

	EXPECT_EQ(EPERM, open_as(self->e.irq, 1000, dac, 1, -1));
	/* The capability is what counts, not the uid. */
	EXPECT_EQ(0, open_as(self->e.irq, 1000, dac_rawio, 2, -1));
	/* CAP_SYS_RAWIO alone does not get past the file mode. */
	EXPECT_EQ(EACCES, open_as(self->e.irq, 1000, rawio, 1, -1));
}

/* --- signals ----------------------------------------------------------- */

static volatile sig_atomic_t alarms;

static void on_alarm(int sig)
{
	(void)sig;
	alarms++;
}

static int arm_timer(int ms, bool restart)
{
	struct sigaction sa = { .sa_handler = on_alarm };
	struct itimerval it = { .it_value = { ms / 1000, (ms % 1000) * 1000 } };

	sigemptyset(&sa.sa_mask);
	sa.sa_flags = restart ? SA_RESTART : 0;
	alarms = 0;
	if (sigaction(SIGALRM, &sa, NULL))
		return -errno;
	return setitimer(ITIMER_REAL, &it, NULL) ? -errno : 0;
}

/* A signal without SA_RESTART ends a blocked read: EINTR. */
TEST_F(err, signal_eintr)
{
	uint64_t t0, ms;
	long c;

	self->fd = t_irq_open(self->e.irq, 0);
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, arm_timer(50, false));
	t0 = t_now_ns();
	c = t_irq_read4(self->fd);
	ms = t_ms_since(t0);
	EXPECT_EQ(-EINTR, c);
	EXPECT_EQ(1, alarms);
	EXPECT_LE(40u, ms);
	/* The read had unmasked the line; nothing is left masked. */
	EXPECT_EQ(0, t_irq_ddepth(self->e.irq));
	/* Usable afterwards. */
	EXPECT_EQ(1, cycle(&self->e, self->fd));
	edu_raise(&self->e, 1);
	EXPECT_EQ(1, t_irq_read4(self->fd));
	edu_ack(&self->e, 1);
	signal(SIGALRM, SIG_DFL);
}

/* With SA_RESTART the read restarts and returns the interrupt. */
TEST_F(err, signal_restart)
{
	struct t_raiser r;
	long c;

	self->fd = t_irq_open(self->e.irq, 0);
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, arm_timer(30, true));
	ASSERT_EQ(0, t_raise_later(&r, &self->e, 200, 1));
	c = t_irq_read4(self->fd);
	pthread_join(r.th, NULL);
	EXPECT_EQ(1, c);
	EXPECT_EQ(1, alarms);
	edu_ack(&self->e, 1);
	signal(SIGALRM, SIG_DFL);
}

/* --- poll, select, epoll ---------------------------------------------------- */

TEST_F(err, poll)
{
	struct t_raiser r;
	uint64_t t0;

	self->fd = t_irq_open(self->e.irq, 0);
	ASSERT_LE(0, self->fd);
	EXPECT_EQ(0, t_poll(self->fd, POLLIN, 0));
	/* poll claimed and unmasked. */
	EXPECT_EQ(0, t_irq_ddepth(self->e.irq));
	EXPECT_EQ(0, t_poll(self->fd, POLLIN, 20));

	/* Raised while poll sleeps (see t_ep_open() on raising first). */
	ASSERT_EQ(0, t_raise_later(&r, &self->e, 10, 1));
	EXPECT_EQ(POLLIN, t_poll(self->fd, POLLIN, 2000));
	pthread_join(r.th, NULL);
	EXPECT_EQ(1, t_irq_ddepth(self->e.irq));
	/* Readable until read. */
	EXPECT_EQ(POLLIN, t_poll(self->fd, POLLIN, 0));
	EXPECT_EQ(1, t_irq_read4(self->fd));
	edu_ack(&self->e, 1);
	EXPECT_EQ(0, t_poll(self->fd, POLLIN, 0));
	EXPECT_EQ(0, t_irq_ddepth(self->e.irq));

	/* A blocking poll wakes on a raise from a thread. */
	t0 = t_now_ns();
	ASSERT_EQ(0, t_raise_later(&r, &self->e, 10, 1));
	EXPECT_EQ(POLLIN, t_poll(self->fd, POLLIN, 2000));
	pthread_join(r.th, NULL);
	EXPECT_LE(9u, t_ms_since(t0));
	EXPECT_EQ(1, t_irq_read4(self->fd));
	edu_ack(&self->e, 1);
}

TEST_F(err, select)
{
	struct timeval tv = { 0, 0 };
	struct t_raiser r;
	fd_set rd;

	self->fd = t_irq_open(self->e.irq, 0);
	ASSERT_LE(0, self->fd);
	FD_ZERO(&rd);
	FD_SET(self->fd, &rd);
	EXPECT_EQ(0, select(self->fd + 1, &rd, NULL, NULL, &tv));

	ASSERT_EQ(0, t_raise_later(&r, &self->e, 10, 1));
	FD_ZERO(&rd);
	FD_SET(self->fd, &rd);
	tv.tv_sec = 2;
	EXPECT_EQ(1, select(self->fd + 1, &rd, NULL, NULL, &tv));
	pthread_join(r.th, NULL);
	EXPECT_TRUE(FD_ISSET(self->fd, &rd));
	EXPECT_EQ(1, t_irq_read4(self->fd));
	edu_ack(&self->e, 1);

	FD_ZERO(&rd);
	FD_SET(self->fd, &rd);
	tv.tv_sec = 0;
	tv.tv_usec = 0;
	EXPECT_EQ(0, select(self->fd + 1, &rd, NULL, NULL, &tv));
}

TEST_F(err, epoll)
{
	struct epoll_event ev = { .events = EPOLLIN }, out[2];
	struct t_raiser r;
	uint64_t t0;
	int i;

	self->fd = t_irq_open(self->e.irq, 0);
	ASSERT_LE(0, self->fd);
	self->epfd = epoll_create1(EPOLL_CLOEXEC);
	ASSERT_LE(0, self->epfd);
	ev.data.u32 = 0x1234;
	ASSERT_EQ(0, epoll_ctl(self->epfd, EPOLL_CTL_ADD, self->fd, &ev));
	EXPECT_EQ(0, epoll_wait(self->epfd, out, 2, 0));

	for (i = 0; i < 3; i++) {
		/* Before the raiser starts, so that its 10 ms sleep is inside. */
		t0 = t_now_ns();
		ASSERT_EQ(0, t_raise_later(&r, &self->e, 10, 1));
		ASSERT_EQ(1, epoll_wait(self->epfd, out, 2, 2000)) TH_LOG("round %d", i);
		pthread_join(r.th, NULL);
		EXPECT_LE(9u, t_ms_since(t0));
		EXPECT_EQ((uint32_t)EPOLLIN, out[0].events);
		EXPECT_EQ(0x1234u, out[0].data.u32);
		/* Level-triggered: still ready until read. */
		EXPECT_EQ(1, epoll_wait(self->epfd, out, 2, 0));
		EXPECT_EQ(1, epoll_wait(self->epfd, out, 2, 0));
		EXPECT_EQ(1, t_irq_read4(self->fd));
		edu_ack(&self->e, 1);
		EXPECT_EQ(0, epoll_wait(self->epfd, out, 2, 0));
		EXPECT_EQ(0, epoll_wait(self->epfd, out, 2, 10));
	}
	EXPECT_EQ(0, t_irq_ddepth(self->e.irq));
}

/* --- ioctl ------------------------------------------------------------------ */

enum { MMIO, INTX, MSI };

enum field {
	F_NONE, F_TYPE, F_FLAGS, F_PAD, F_RES0, F_RES1, F_RES2, F_RES3,
	F_BAR, F_STATUS_OFF, F_STATUS_MASK, F_ACK_OFF, F_ACK_MODE, F_ACK_VALUE,
	F_DEVFN, F_FUNC, F_BUS, F_DOMAIN,
};

struct bad_dev {
	const char *what;
	int base;		/* MMIO, INTX or MSI description of edu@5 */
	int err;
	enum field f1;
	__u32 v1;
	enum field f2;
	__u32 v2;
};

static void set_field(struct irq_user_dev *d, enum field f, __u32 v)
{
	switch (f) {
	case F_NONE: break;
	case F_TYPE: d->type = v; break;
	case F_FLAGS: d->flags = v; break;
	case F_PAD: d->__pad = v; break;
	case F_RES0: d->__reserved[0] = v; break;
	case F_RES1: d->__reserved[1] = v; break;
	case F_RES2: d->__reserved[2] = v; break;
	case F_RES3: d->__reserved[3] = v; break;
	case F_BAR: d->mmio.bar = v; break;
	case F_STATUS_OFF: d->mmio.status_off = v; break;
	case F_STATUS_MASK: d->mmio.status_mask = v; break;
	case F_ACK_OFF: d->mmio.ack_off = v; break;
	case F_ACK_MODE: d->mmio.ack_mode = v; break;
	case F_ACK_VALUE: d->mmio.ack_value = v; break;
	case F_DEVFN: d->devfn = v; break;
	case F_FUNC: d->devfn |= v; break;
	case F_BUS: d->bus = v; break;
	case F_DOMAIN: d->domain = v; break;
	}
}

static const struct bad_dev bad_devs[] = {
	{ .what = "type 0", .base = MMIO, .err = EINVAL,
	  .f1 = F_TYPE, .v1 = 0 },
	{ .what = "type 3 (MSI) with MMIO fields", .base = MMIO, .err = EINVAL,
	  .f1 = F_TYPE, .v1 = IRQ_USER_DEV_PCI_MSI },
	{ .what = "type 4", .base = INTX, .err = EINVAL,
	  .f1 = F_TYPE, .v1 = 4 },
	{ .what = "msi flags 1", .base = MSI, .err = EINVAL,
	  .f1 = F_FLAGS, .v1 = 1 },
	{ .what = "msi __pad 1", .base = MSI, .err = EINVAL,
	  .f1 = F_PAD, .v1 = 1 },
	{ .what = "msi __reserved[2]", .base = MSI, .err = EINVAL,
	  .f1 = F_RES2, .v1 = 1 },
	{ .what = "msi mmio.bar", .base = MSI, .err = EINVAL,
	  .f1 = F_BAR, .v1 = 1 },
	{ .what = "msi mmio.status_mask", .base = MSI, .err = EINVAL,
	  .f1 = F_STATUS_MASK, .v1 = 1 },
	{ .what = "msi mmio.ack_value", .base = MSI, .err = EINVAL,
	  .f1 = F_ACK_VALUE, .v1 = 1 },
	{ .what = "msi: no device at slot 31", .base = MSI, .err = ENODEV,
	  .f1 = F_DEVFN, .v1 = 31 << 3 },
	{ .what = "type ~0", .base = MMIO, .err = EINVAL,
	  .f1 = F_TYPE, .v1 = ~0u },
	{ .what = "flags 1", .base = MMIO, .err = EINVAL,
	  .f1 = F_FLAGS, .v1 = 1 },
	{ .what = "intx flags 1<<31", .base = INTX, .err = EINVAL,
	  .f1 = F_FLAGS, .v1 = 1u << 31 },
	{ .what = "__pad 1", .base = MMIO, .err = EINVAL,
	  .f1 = F_PAD, .v1 = 1 },
	{ .what = "intx __pad 0x8000", .base = INTX, .err = EINVAL,
	  .f1 = F_PAD, .v1 = 0x8000 },
	{ .what = "__reserved[0]", .base = MMIO, .err = EINVAL,
	  .f1 = F_RES0, .v1 = 1 },
	{ .what = "__reserved[1]", .base = MMIO, .err = EINVAL,
	  .f1 = F_RES1, .v1 = 1 },
	{ .what = "__reserved[2]", .base = MMIO, .err = EINVAL,
	  .f1 = F_RES2, .v1 = 1 },
	{ .what = "intx __reserved[3]", .base = INTX, .err = EINVAL,
	  .f1 = F_RES3, .v1 = 1u << 31 },
	{ .what = "intx mmio.bar", .base = INTX, .err = EINVAL,
	  .f1 = F_BAR, .v1 = 1 },
	{ .what = "intx mmio.status_off", .base = INTX, .err = EINVAL,
	  .f1 = F_STATUS_OFF, .v1 = 0x24 },
	{ .what = "intx mmio.status_mask", .base = INTX, .err = EINVAL,
	  .f1 = F_STATUS_MASK, .v1 = 1 },
	{ .what = "intx mmio.ack_off", .base = INTX, .err = EINVAL,
	  .f1 = F_ACK_OFF, .v1 = 0x64 },
	{ .what = "intx mmio.ack_mode", .base = INTX, .err = EINVAL,
	  .f1 = F_ACK_MODE, .v1 = 1 },
	{ .what = "intx mmio.ack_value", .base = INTX, .err = EINVAL,
	  .f1 = F_ACK_VALUE, .v1 = 1 },
	{ .what = "bar 6", .base = MMIO, .err = EINVAL,
	  .f1 = F_BAR, .v1 = 6 },
	{ .what = "bar ~0", .base = MMIO, .err = EINVAL,
	  .f1 = F_BAR, .v1 = ~0u },
	{ .what = "bar 1 (absent)", .base = MMIO, .err = EINVAL,
	  .f1 = F_BAR, .v1 = 1 },
	{ .what = "bar 5 (absent)", .base = MMIO, .err = EINVAL,
	  .f1 = F_BAR, .v1 = 5 },
	{ .what = "status_off 0x25", .base = MMIO, .err = EINVAL,
	  .f1 = F_STATUS_OFF, .v1 = 0x25 },
	{ .what = "status_off 0x26", .base = MMIO, .err = EINVAL,
	  .f1 = F_STATUS_OFF, .v1 = 0x26 },
	{ .what = "status_off 0x27", .base = MMIO, .err = EINVAL,
	  .f1 = F_STATUS_OFF, .v1 = 0x27 },
	{ .what = "ack_off 0x66", .base = MMIO, .err = EINVAL,
	  .f1 = F_ACK_OFF, .v1 = 0x66 },
	{ .what = "status_off at BAR end", .base = MMIO, .err = EINVAL,
	  .f1 = F_STATUS_OFF, .v1 = 1u << 20 },
	{ .what = "ack_off at BAR end", .base = MMIO, .err = EINVAL,
	  .f1 = F_ACK_OFF, .v1 = 1u << 20 },
	{ .what = "status_off far out", .base = MMIO, .err = EINVAL,
	  .f1 = F_STATUS_OFF, .v1 = 0x40000000 },
	/* max(offsets) + 4 must not wrap around to pass the BAR check */
	{ .what = "status_off 0xfffffffc", .base = MMIO, .err = EINVAL,
	  .f1 = F_STATUS_OFF, .v1 = 0xfffffffcu },
	{ .what = "ack_off 0xfffffffc", .base = MMIO, .err = EINVAL,
	  .f1 = F_ACK_OFF, .v1 = 0xfffffffcu },
	{ .what = "status_mask 0", .base = MMIO, .err = EINVAL,
	  .f1 = F_STATUS_MASK, .v1 = 0 },
	{ .what = "ack_mode 2", .base = MMIO, .err = EINVAL,
	  .f1 = F_ACK_MODE, .v1 = 2 },
	{ .what = "ack_mode ~0", .base = MMIO, .err = EINVAL,
	  .f1 = F_ACK_MODE, .v1 = ~0u },
	{ .what = "ack_mode STATUS with ack_value", .base = MMIO, .err = EINVAL,
	  .f1 = F_ACK_MODE, .v1 = IRQ_USER_ACK_STATUS, .f2 = F_ACK_VALUE, .v2 = 1 },
	{ .what = "ack_mode VALUE, bar 6", .base = MMIO, .err = EINVAL,
	  .f1 = F_ACK_MODE, .v1 = IRQ_USER_ACK_VALUE, .f2 = F_BAR, .v2 = 6 },
	{ .what = "no device at slot 31", .base = MMIO, .err = ENODEV,
	  .f1 = F_DEVFN, .v1 = 31 << 3 },
	{ .what = "no function 5", .base = MMIO, .err = ENODEV,
	  .f1 = F_FUNC, .v1 = 5 },
	{ .what = "intx: no bus 7", .base = INTX, .err = ENODEV,
	  .f1 = F_BUS, .v1 = 7 },
	{ .what = "no domain 1", .base = MMIO, .err = ENODEV,
	  .f1 = F_DOMAIN, .v1 = 1 },
	{ .what = "intx: no domain 0x10000", .base = INTX, .err = ENODEV,
	  .f1 = F_DOMAIN, .v1 = 0x10000 },
	/* validation comes before the lookup */
	{ .what = "bad flags on no device", .base = MMIO, .err = EINVAL,
	  .f1 = F_FLAGS, .v1 = 1, .f2 = F_DEVFN, .v2 = 31 << 3 },
};

/* Every invalid description fails as documented and changes nothing. */
TEST_F(err, ioctl_validation)
{
	struct irq_user_dev d;
	struct irq_user_event ev;
	struct termios tio;
	size_t i;
	int ret;

	self->fd = t_irq_open(self->e.irq, O_NONBLOCK);
	ASSERT_LE(0, self->fd);

	for (i = 0; i < sizeof(bad_devs) / sizeof(bad_devs[0]); i++) {
		const struct bad_dev *b = &bad_devs[i];

		if (b->base == MMIO)
			edu_describe_mmio(&self->e, &d);
		else if (b->base == MSI)
			edu_describe_msi(&self->e, &d);
		else
			edu_describe_intx(&self->e, &d);
		set_field(&d, b->f1, b->v1);
		set_field(&d, b->f2, b->v2);
		ret = t_irq_set_device(self->fd, &d);
		EXPECT_EQ(-b->err, ret) TH_LOG("%s: got %s", b->what,
					       ret ? strerror(-ret) : "success");
		if (!ret) {
			/* Claimed by mistake: start over with a fresh file. */
			t_irq_close(&self->fd);
			self->fd = t_irq_open(self->e.irq, O_NONBLOCK);
			ASSERT_LE(0, self->fd);
		}
		ASSERT_FALSE(t_irq_has_action(self->e.irq, t_irq_user_name()))
			TH_LOG("after %s", b->what);
	}

	/* Bad pointers, unknown ioctls. */
	errno = 0;
	EXPECT_EQ(-1, ioctl(self->fd, IRQ_USER_SET_DEVICE, NULL));
	EXPECT_EQ(EFAULT, errno);
	errno = 0;
	EXPECT_EQ(-1, ioctl(self->fd, IRQ_USER_SET_DEVICE, bad_ptr));
	EXPECT_EQ(EFAULT, errno);
	errno = 0;
	EXPECT_EQ(-1, ioctl(self->fd, _IO(IRQ_USER_IOC_MAGIC, 1), 0));
	EXPECT_EQ(ENOTTY, errno);
	errno = 0;
	EXPECT_EQ(-1, ioctl(self->fd, _IOW(IRQ_USER_IOC_MAGIC, 0, __u32), &d));
	EXPECT_EQ(ENOTTY, errno);
	errno = 0;
	EXPECT_EQ(-1, ioctl(self->fd, _IOR(IRQ_USER_IOC_MAGIC, 0, struct irq_user_dev), &d));
	EXPECT_EQ(ENOTTY, errno);
	errno = 0;
	EXPECT_EQ(-1, ioctl(self->fd, TCGETS, &tio));
	EXPECT_EQ(ENOTTY, errno);
	EXPECT_FALSE(t_irq_has_action(self->e.irq, t_irq_user_name()));

	/* The file is as new: a valid description works... */
	edu_describe_mmio(&self->e, &d);
	ret = t_irq_set_device(self->fd, &d);
	ASSERT_EQ(0, ret) TH_LOG("valid SET_DEVICE: %s", strerror(-ret));
	EXPECT_TRUE(t_irq_has_action(self->e.irq, t_irq_user_name()));
	edu_raise(&self->e, 1);
	ASSERT_TRUE(edu_wait_clear(&self->e, 2000));
	ASSERT_EQ(POLLIN, t_poll(self->fd, POLLIN, 2000));
	ASSERT_EQ(8, t_irq_read_ev(self->fd, &ev));
	EXPECT_EQ(1u, ev.count);
	EXPECT_EQ(1u, ev.status);

	/* ...once: a second one is EBUSY, valid or not, and changes nothing. */
	EXPECT_EQ(-EBUSY, t_irq_set_device(self->fd, &d));
	edu_describe_intx(&self->e, &d);
	EXPECT_EQ(-EBUSY, t_irq_set_device(self->fd, &d));
	d.type = 0;
	EXPECT_EQ(-EINVAL, t_irq_set_device(self->fd, &d));
	errno = 0;
	EXPECT_EQ(-1, ioctl(self->fd, _IO(IRQ_USER_IOC_MAGIC, 1), 0));
	EXPECT_EQ(ENOTTY, errno);
	edu_raise(&self->e, 2);
	ASSERT_TRUE(edu_wait_clear(&self->e, 2000));
	ASSERT_EQ(POLLIN, t_poll(self->fd, POLLIN, 2000));
	ASSERT_EQ(8, t_irq_read_ev(self->fd, &ev));
	EXPECT_EQ(1u, ev.count);
	EXPECT_EQ(2u, ev.status);
	EXPECT_EQ(-EAGAIN, t_irq_read_ev(self->fd, &ev));
}

/* A description of a device on another line: EINVAL, nothing claimed. */
TEST_F(err, ioctl_other_line_einval)
{
	struct irq_user_dev d;
	struct edu other;
	int ret, irq;

	ret = edu_open_clean(&other, EDU_SLOT_A);
	ASSERT_EQ(0, ret) TH_LOG("edu@%d: %s", EDU_SLOT_A, strerror(-ret));
	if (other.irq == self->e.irq) {
		edu_close_clean(&other);
		SKIP(return, "edu@%d and edu@%d share irq %d", EDU_SLOT_A,
		     EDU_SLOT_C, other.irq);
	}
	self->fd = t_irq_open(self->e.irq, O_NONBLOCK);
	ASSERT_LE(0, self->fd);
	edu_describe_mmio(&other, &d);
	EXPECT_EQ(-EINVAL, t_irq_set_device(self->fd, &d));
	edu_describe_intx(&other, &d);
	EXPECT_EQ(-EINVAL, t_irq_set_device(self->fd, &d));
	/* Its MSI neither: the file names the device by its line. */
	edu_describe_msi(&other, &d);
	EXPECT_EQ(-EINVAL, t_irq_set_device(self->fd, &d));
	EXPECT_FALSE(t_irq_has_action(self->e.irq, t_irq_user_name()));
	EXPECT_FALSE(t_irq_has_action(other.irq, t_irq_user_name()));
	/* The other device is still enabled and routed (put back as found). */
	irq = other.irq;
	edu_close(&other);
	ret = edu_open_clean(&other, EDU_SLOT_A);
	EXPECT_EQ(0, ret);
	EXPECT_EQ(irq, other.irq);
	edu_close_clean(&other);

	/* The right device still goes in. */
	edu_describe_intx(&self->e, &d);
	ASSERT_EQ(0, t_irq_set_device(self->fd, &d));
	ASSERT_EQ(-EAGAIN, t_irq_read4(self->fd));
	EXPECT_EQ(1, cycle(&self->e, self->fd));
}

/* Failed descriptions leave the file unclaimed: the read claims it exclusively. */
TEST_F(err, failed_ioctl_then_exclusive)
{
	struct irq_user_dev d;
	struct irq_user_event ev;

	self->fd = t_irq_open(self->e.irq, O_NONBLOCK);
	ASSERT_LE(0, self->fd);
	edu_describe_mmio(&self->e, &d);
	d.mmio.status_mask = 0;
	EXPECT_EQ(-EINVAL, t_irq_set_device(self->fd, &d));
	edu_describe_mmio(&self->e, &d);
	d.devfn = 30 << 3;
	EXPECT_EQ(-ENODEV, t_irq_set_device(self->fd, &d));

	ASSERT_EQ(-EAGAIN, t_irq_read4(self->fd));
	self->epfd = t_ep_open(self->fd);
	ASSERT_LE(0, self->epfd);
	edu_raise(&self->e, 1);
	ASSERT_EQ(1, t_ep_wait(self->epfd, 2000));
	/* Exclusive: masked, the device not acknowledged, no status. */
	EXPECT_EQ(1, t_irq_ddepth(self->e.irq));
	EXPECT_EQ(1u, edu_status(&self->e));
	ASSERT_EQ(8, t_irq_read_ev(self->fd, &ev));
	EXPECT_EQ(1u, ev.count);
	EXPECT_EQ(0u, ev.status);
	edu_ack(&self->e, 1);

	/* Claimed exclusively: a description now is EBUSY. */
	edu_describe_mmio(&self->e, &d);
	EXPECT_EQ(-EBUSY, t_irq_set_device(self->fd, &d));
	edu_describe_intx(&self->e, &d);
	EXPECT_EQ(-EBUSY, t_irq_set_device(self->fd, &d));
	/* And still exclusive and working. */
	EXPECT_EQ(1, cycle(&self->e, self->fd));
	EXPECT_EQ(-EAGAIN, t_irq_read4(self->fd));
	EXPECT_EQ(0, t_irq_ddepth(self->e.irq));
}

/* An exclusive claim by poll() also makes a description EBUSY. */
TEST_F(err, poll_claims)
{
	struct irq_user_dev d;

	self->fd = t_irq_open(self->e.irq, 0);
	ASSERT_LE(0, self->fd);
	EXPECT_EQ(0, t_poll(self->fd, POLLIN, 0));
	EXPECT_TRUE(t_irq_has_action(self->e.irq, t_irq_user_name()));
	edu_describe_mmio(&self->e, &d);
	EXPECT_EQ(-EBUSY, t_irq_set_device(self->fd, &d));
	EXPECT_EQ(1, cycle(&self->e, self->fd));
}

/* ACK_VALUE: the kernel writes ack_value, not the status. */
TEST_F(err, ack_value_mode)
{
	struct irq_user_dev d;
	struct irq_user_event ev;
	int i;

	self->fd = t_irq_open(self->e.irq, O_NONBLOCK);
	ASSERT_LE(0, self->fd);
	edu_describe_mmio(&self->e, &d);
	d.mmio.ack_mode = IRQ_USER_ACK_VALUE;
	d.mmio.ack_value = 0x3;
	d.mmio.status_mask = 0x1;
	ASSERT_EQ(0, t_irq_set_device(self->fd, &d));
	for (i = 0; i < 100; i++) {
		edu_raise(&self->e, 1);
		ASSERT_TRUE(edu_wait_clear(&self->e, 2000)) TH_LOG("raise %d", i);
	}
	/* Bit 1 (outside the mask) cleared by the ack value along the way. */
	edu_raise(&self->e, 3);
	ASSERT_TRUE(edu_wait_clear(&self->e, 2000));
	t_msleep(5);
	ASSERT_EQ(8, t_irq_read_ev(self->fd, &ev));
	EXPECT_EQ(101u, ev.count);
	EXPECT_EQ(1u, ev.status);	/* status & mask */
}

TEST_HARNESS_MAIN
