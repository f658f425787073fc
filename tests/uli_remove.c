// SPDX-License-Identifier: MIT
/*
 * uli_remove - a registered device goes away under its owner: PCI removal
 * through sysfs (what hot unplug does), or a kernel driver bound to it by
 * force.  The registration ends while the device is still there to be let
 * go of: the owner sees ENODEV, a sleeper wakes, ULI_destroy() returns
 * normally, the kernel log stays clean, and after a rescan the device is
 * back and serves a new registration.  For the /proc method the same
 * holds for a reader blocked in read() on a described device.
 */
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <linux/irq_user.h>

#include "kselftest_harness.h"
#include "helpers.h"

static struct edu e;
static volatile uint64_t handled;

static void handler(void *arg)
{
	(void)arg;
	edu_ack(&e, edu_status(&e));
	handled++;
}

static int remove_device(const struct edu *d)
{
	char path[96];

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/remove", d->bdf);
	return t_write_file(path, "1");
}

/* Rescan, then wait for the device to be back. */
static int rescan(const struct edu *d)
{
	char path[96];
	int i, ret = t_write_file("/sys/bus/pci/rescan", "1");

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s", d->bdf);
	for (i = 0; i < 100 && access(path, F_OK); i++)
		usleep(10000);
	return ret ? ret : access(path, F_OK) ? -ENODEV : 0;
}

/* A thread sleeping on semaphore 0; its result in sleep_ret/sleep_err. */
static void *uli_sleeper(void *arg)
{
	static int ret[2];

	ret[0] = ULI_sleep(arg, 0);
	ret[1] = errno;
	return ret;
}

/* Raise until handled reaches want; false on timeout. */
static bool raise_and_wait(uint64_t want)
{
	edu_raise(&e, 1);
	return t_wait_count(&handled, want, 2000);
}

/* The device serves a new registration: after rescan, or at the end. */
static void serves_again(struct __test_metadata *_metadata, int flags)
{
	void *uli;
	int i;

	ASSERT_EQ(0, edu_open(&e, EDU_SLOT_C));
	edu_ack(&e, ~0u);
	handled = 0;
	uli = ULI_register_pci(e.bdf, handler, NULL, 0, NULL, 0, flags);
	ASSERT_NE(NULL, uli) TH_LOG("register after rescan: %s", strerror(errno));
	ASSERT_EQ(0, ULI_set_budget(uli, T_LONG_BUDGET));	/* see removed_under() */
	for (i = 1; i <= 20; i++)
		ASSERT_TRUE(raise_and_wait(i)) TH_LOG("raise %d after rescan not handled", i);
	EXPECT_EQ(0, ULI_destroy(uli));
	edu_close(&e);
}

/*
 * A removal and a rescan take some 30 s of the debug kernel's time under
 * TCG (the PCI core and the ACPI interpreter under KASAN and lockdep):
 * the cases have 300 s, not the harness's 30 (a fixture: the harness
 * takes a timeout only there).
 */
FIXTURE(slow) {};
FIXTURE_SETUP(slow) {}
FIXTURE_TEARDOWN(slow) {}

static void removed_under(struct __test_metadata *_metadata, int flags)
{
	void **res, *uli;
	pthread_t thr;
	int i;

	ASSERT_EQ(0, edu_open(&e, EDU_SLOT_C));
	edu_ack(&e, ~0u);
	handled = 0;
	uli = ULI_register_pci(e.bdf, handler, NULL, 1, NULL, 0, flags);
	ASSERT_NE(NULL, uli) TH_LOG("ULI_register_pci: %s", strerror(errno));
	/*
	 * Not the budget's test: a host stall counts against the 10 ms
	 * default, and ended a handler here once (SIGXCPU, the debug
	 * kernel on a loaded host).
	 */
	ASSERT_EQ(0, ULI_set_budget(uli, T_LONG_BUDGET));
	if (strcmp(ULI_mode(uli), "upcall")) {
		ULI_destroy(uli);
		edu_close(&e);
		SKIP(return, "the /proc method's removal is its own case");
	}
	for (i = 1; i <= 20; i++)
		ASSERT_TRUE(raise_and_wait(i));
	ASSERT_EQ(0, pthread_create(&thr, NULL, uli_sleeper, uli));
	usleep(50000);

	edu_close(&e);
	ASSERT_EQ(0, remove_device(&e));

	/* The sleeper is woken at once, with the end. */
	ASSERT_EQ(0, pthread_join(thr, (void **)&res));
	EXPECT_EQ(-1, ((int *)res)[0]);
	EXPECT_EQ(ENODEV, ((int *)res)[1]);
	/* Every call but the statistics fails with ENODEV. */
	errno = 0;
	EXPECT_EQ(-1, ULI_wakeup(uli, 0));
	EXPECT_EQ(ENODEV, errno);
	EXPECT_EQ(0, t_registrations());
	EXPECT_EQ(0, ULI_destroy(uli));

	ASSERT_EQ(0, rescan(&e));
	serves_again(_metadata, flags);
}

TEST_F_TIMEOUT(slow, removed_intx, 300) { removed_under(_metadata, ULI_INTX); }
TEST_F_TIMEOUT(slow, removed_msi, 300) { removed_under(_metadata, ULI_MSI); }

/*
 * Removed while a storm runs and a handler may be running: teardown
 * waits for it, the device is let go of, rescan brings it back.  Removal
 * takes the BAR mapping away first (sysfs resource files), so a handler
 * called in between faults: the owner gets SIGSEGV, which it ignores.
 */
static volatile bool storm_on;

static void storm_handler(void *arg)
{
	(void)arg;
	edu_ack(&e, edu_status(&e));
	handled++;
	if (storm_on)
		edu_raise(&e, 1);
}

/*
 * A removal in a storm takes seconds on a debug kernel (KASAN, lockdep):
 * more than the harness's default 30 s for the 20 reps.
 */
TEST_F_TIMEOUT(slow, removed_in_storm, 900)
{
	int rep, reps = 20;
	void *uli;

	signal(SIGSEGV, SIG_IGN);
	for (rep = 0; rep < reps; rep++) {
		ASSERT_EQ(0, edu_open(&e, EDU_SLOT_C));
		edu_ack(&e, ~0u);
		handled = 0;
		storm_on = true;
		uli = ULI_register_pci(e.bdf, storm_handler, NULL, 0, NULL, 0,
				       rep & 1 ? ULI_MSI : ULI_INTX);
		ASSERT_NE(NULL, uli) TH_LOG("rep %d: %s", rep, strerror(errno));
		if (strcmp(ULI_mode(uli), "upcall")) {
			ULI_destroy(uli);
			edu_close(&e);
			SKIP(return, "a re-raising handler would starve the proc thread");
		}
		ASSERT_EQ(0, ULI_set_budget(uli, T_LONG_BUDGET));
		edu_raise(&e, 1);
		ASSERT_TRUE(t_wait_count(&handled, 50, 5000));
		ASSERT_EQ(0, remove_device(&e)) TH_LOG("rep %d", rep);
		edu_close(&e);
		EXPECT_EQ(0, t_registrations());
		EXPECT_EQ(0, ULI_destroy(uli));
		ASSERT_EQ(0, rescan(&e)) TH_LOG("rep %d", rep);
	}
	storm_on = false;
	signal(SIGSEGV, SIG_DFL);
	serves_again(_metadata, ULI_INTX);
}

/*
 * root binds a driver by force (driver_override, then a probe) to a
 * registered device: the registration ends before the driver probes, and
 * the driver gets the device.  Binding by id alone is refused.
 */
TEST_F_TIMEOUT(slow, driver_forced, 300)
{
	char path[128];
	void *uli;

	ASSERT_EQ(0, edu_open(&e, EDU_SLOT_C));
	edu_ack(&e, ~0u);
	handled = 0;
	uli = ULI_register_pci(e.bdf, handler, NULL, 1, NULL, 0, ULI_INTX);
	ASSERT_NE(NULL, uli);
	ASSERT_EQ(0, ULI_set_budget(uli, T_LONG_BUDGET));	/* see removed_under() */
	ASSERT_TRUE(raise_and_wait(1));

	/*
	 * By id: refused, the device is user space's.  The id is taken back
	 * at once: it would bind every free edu device from then on.
	 */
	ASSERT_EQ(0, t_write_file("/sys/bus/pci/drivers/uio_pci_generic/new_id", "1234 11e8"));
	snprintf(path, sizeof(path), "/sys/bus/pci/drivers/uio_pci_generic/%s", e.bdf);
	EXPECT_NE(0, t_write_file("/sys/bus/pci/drivers/uio_pci_generic/bind", e.bdf));
	t_write_file("/sys/bus/pci/drivers/uio_pci_generic/remove_id", "1234 11e8");
	EXPECT_NE(0, access(path, F_OK));
	ASSERT_TRUE(raise_and_wait(2)) TH_LOG("the registration did not survive a refused bind");

	/* By force: the registration ends, the driver has the device. */
	EXPECT_EQ(0, edu_bind(&e, "uio_pci_generic"));
	EXPECT_EQ(0, access(path, F_OK));
	if (!strcmp(ULI_mode(uli), "upcall")) {
		errno = 0;
		EXPECT_EQ(-1, ULI_wakeup(uli, 0));
		EXPECT_EQ(ENODEV, errno);
	}
	EXPECT_EQ(0, t_registrations());
	EXPECT_EQ(0, ULI_destroy(uli));
	EXPECT_EQ(0, edu_bind(&e, NULL));
	edu_close(&e);
	serves_again(_metadata, ULI_INTX);
}

/* The /proc method: a reader blocked on a described device that goes. */
static void *proc_reader(void *arg)
{
	static int ret[2];
	uint32_t n;

	ret[0] = (int)read(*(int *)arg, &n, sizeof(n));
	ret[1] = errno;
	return ret;
}

/*
 * A reader blocked on a described device that goes: read() ends with
 * ENODEV, the line (or the MSI vector the kernel set up for the file)
 * is let go of, and the rescanned device serves again.
 */
static void proc_removed(struct __test_metadata *_metadata, bool msi)
{
	struct irq_user_dev d;
	int fd, *res, vec = 0;
	char path[64];
	pthread_t thr;
	uint32_t n;

	ASSERT_EQ(0, edu_open(&e, EDU_SLOT_C));
	edu_ack(&e, ~0u);
	snprintf(path, sizeof(path), "/proc/irq/%d/irq", e.irq);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, fd) TH_LOG("%s: %s", path, strerror(errno));
	if (msi)
		edu_describe_msi(&e, &d);
	else
		edu_describe_intx(&e, &d);
	ASSERT_EQ(0, ioctl(fd, IRQ_USER_SET_DEVICE, &d)) TH_LOG("%s", strerror(errno));
	if (msi) {
		vec = t_msi_irq(&e);
		ASSERT_LT(0, vec);
		EXPECT_TRUE(t_irq_has_action(vec, t_irq_user_name()));
	}
	edu_raise(&e, 1);
	ASSERT_EQ(sizeof(n), read(fd, &n, sizeof(n)));
	edu_ack(&e, ~0u);
	ASSERT_EQ(0, pthread_create(&thr, NULL, proc_reader, &fd));
	usleep(50000);

	edu_close(&e);
	ASSERT_EQ(0, remove_device(&e));
	ASSERT_EQ(0, pthread_join(thr, (void **)&res));
	EXPECT_EQ(-1, res[0]);
	EXPECT_EQ(ENODEV, res[1]);
	EXPECT_EQ(-1, read(fd, &n, sizeof(n)));
	EXPECT_EQ(ENODEV, errno);
	EXPECT_FALSE(t_irq_has_action(e.irq, t_irq_user_name()));
	if (msi)
		EXPECT_FALSE(t_irq_has_action(vec, t_irq_user_name()));
	close(fd);

	ASSERT_EQ(0, rescan(&e));
	serves_again(_metadata, ULI_INTX);
}

TEST_F_TIMEOUT(slow, proc_removed_under_reader, 300) { proc_removed(_metadata, false); }
TEST_F_TIMEOUT(slow, proc_msi_removed_under_reader, 300) { proc_removed(_metadata, true); }

TEST_HARNESS_MAIN
