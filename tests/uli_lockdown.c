// SPDX-License-Identifier: MIT
/*
 * uli_lockdown - under kernel lockdown (LOCKDOWN_PCI_ACCESS, as with
 * `lockdown=integrity`), whatever programs a PCI device from user space
 * is refused with EPERM, as sysfs BAR mappings and /dev/mem are:
 * ULI registrations of PCI INTx and MSI, and /proc device descriptions
 * (INTx and MMIO), in both delivery methods.  The refusal changes
 * nothing: no action on the line, no driver_override left.
 *
 * Lockdown cannot be lifted once set, so `make test` runs this last in a
 * boot of its own (qemu/run-tests), with ULI_LOCKDOWN=1; elsewhere it
 * skips.
 */
#include <sys/ioctl.h>
#include <linux/irq_user.h>

#include "kselftest_harness.h"
#include "helpers.h"

static bool locked_down(void)
{
	char buf[256];

	return t_read_file("/sys/kernel/security/lockdown", buf, sizeof(buf)) > 0 &&
	       !strstr(buf, "[none]");
}

static void handler(void *arg)
{
	(void)arg;
}

FIXTURE(ld) {
	char bdf[16];
	char override[96];
	int irq;
};

FIXTURE_SETUP(ld)
{
	char path[96], buf[32];

	/* ULI_LOCKDOWN=1: make test locked this boot down; a skip would hide that it did not. */
	if (getenv("ULI_LOCKDOWN"))
		ASSERT_TRUE(locked_down());
	if (!locked_down())
		SKIP(return, "the kernel is not locked down (boot with lockdown=integrity)");
	snprintf(self->bdf, sizeof(self->bdf), "0000:00:%02x.0", EDU_SLOT_C);
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/irq", self->bdf);
	ASSERT_LT(0, t_read_file(path, buf, sizeof(buf)));
	self->irq = atoi(buf);
	snprintf(self->override, sizeof(self->override),
		 "/sys/bus/pci/devices/%s/driver_override", self->bdf);
}

FIXTURE_TEARDOWN(ld)
{
}

static void expect_untouched(struct __test_metadata *_metadata,
			     FIXTURE_DATA(ld) *self)
{
	char buf[32];

	EXPECT_EQ(0, t_irq_nactions(self->irq));
	ASSERT_LT(0, t_read_file(self->override, buf, sizeof(buf)));
	EXPECT_STREQ("(null)\n", buf);
}

TEST_F(ld, register_pci)
{
	static const int flags[] = { ULI_INTX, ULI_MSI };
	unsigned int i;

	for (i = 0; i < 2; i++) {
		errno = 0;
		EXPECT_EQ(NULL, ULI_register_pci(self->bdf, handler, NULL, 0, NULL, 0, flags[i]));
		EXPECT_EQ(EPERM, errno) TH_LOG("flags %d: %s", flags[i], strerror(errno));
		expect_untouched(_metadata, self);
	}
}

TEST_F(ld, describe_device)
{
	struct irq_user_dev d = {
		.domain = 0, .bus = 0, .devfn = EDU_SLOT_C << 3,
		.mmio = { .bar = 0, .status_off = 0x24, .status_mask = ~0u,
			  .ack_off = 0x64, .ack_mode = IRQ_USER_ACK_STATUS },
	};
	int fd = t_irq_open(self->irq, 0);

	ASSERT_LE(0, fd) TH_LOG("open /proc/irq/%d/irq: %s", self->irq, strerror(-fd));
	d.type = IRQ_USER_DEV_MMIO;
	EXPECT_EQ(-EPERM, t_irq_set_device(fd, &d));
	d.type = IRQ_USER_DEV_PCI_INTX;
	memset(&d.mmio, 0, sizeof(d.mmio));	/* an INTx description has none */
	EXPECT_EQ(-EPERM, t_irq_set_device(fd, &d));
	close(fd);
	expect_untouched(_metadata, self);
}

TEST_HARNESS_MAIN
