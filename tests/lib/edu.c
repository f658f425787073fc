// SPDX-License-Identifier: MIT
/* edu.c - the QEMU edu device from user space; see edu.h. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <linux/irq_user.h>

#include "edu.h"
#include "helpers.h"
#include "uli.h"

#define EDU_BAR_SIZE	(1 << 20)

static int sysfs_path(char *buf, size_t len, const struct edu *e, const char *file)
{
	int n = snprintf(buf, len, "/sys/bus/pci/devices/%s/%s", e->bdf, file);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int edu_open(struct edu *e, int slot)
{
	char path[128], buf[32];
	uint32_t id;
	int fd, n;

	memset(e, 0, sizeof(*e));
	e->domain = 0;
	e->bus = 0;
	e->devfn = (unsigned int)slot << 3;
	snprintf(e->bdf, sizeof(e->bdf), "0000:00:%02x.0", slot);

	/* Enabling routes the INTx pin, which gives the final irq number. */
	sysfs_path(path, sizeof(path), e, "enable");
	n = t_write_file(path, "1");
	if (n && n != -EIO)	/* EIO: already enabled by a driver */
		return n;

	sysfs_path(path, sizeof(path), e, "irq");
	n = t_read_file(path, buf, sizeof(buf));
	if (n <= 0)
		return n ? n : -EIO;
	e->irq = atoi(buf);

	sysfs_path(path, sizeof(path), e, "resource0");
	fd = open(path, O_RDWR | O_SYNC | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	e->regs = mmap(NULL, EDU_BAR_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (e->regs == MAP_FAILED) {
		e->regs = NULL;
		return -errno;
	}
	id = edu_read(e, EDU_REG_ID);
	if (id != EDU_ID) {
		edu_close(e);
		return -ENODEV;
	}
	return 0;
}

void edu_close(struct edu *e)
{
	if (e->regs)
		munmap((void *)e->regs, EDU_BAR_SIZE);
	e->regs = NULL;
}

bool edu_wait_clear(const struct edu *e, unsigned int timeout_ms)
{
	uint64_t end = t_now_ns() + (uint64_t)timeout_ms * 1000000u;
	unsigned int i = 0;

	while (edu_status(e)) {
		if (++i % 256 == 0 && t_now_ns() > end)
			return false;
	}
	return true;
}

static int config_rw(const struct edu *e, off_t off, void *buf, size_t len, bool wr)
{
	char path[128];
	ssize_t n;
	int fd;

	sysfs_path(path, sizeof(path), e, "config");
	fd = open(path, (wr ? O_RDWR : O_RDONLY) | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = wr ? pwrite(fd, buf, len, off) : pread(fd, buf, len, off);
	n = n == (ssize_t)len ? 0 : n < 0 ? -errno : -EIO;
	close(fd);
	return n;
}

int edu_set_intx(const struct edu *e, bool enabled)
{
	uint16_t cmd;
	int ret = config_rw(e, 4, &cmd, 2, false);

	if (ret)
		return ret;
	cmd = enabled ? cmd & ~(1u << 10) : cmd | (1u << 10);
	return config_rw(e, 4, &cmd, 2, true);
}

int edu_intx_enabled(const struct edu *e)
{
	uint16_t cmd;
	int ret = config_rw(e, 4, &cmd, 2, false);

	return ret ? ret : !(cmd & (1u << 10));
}

int edu_intx_pending(const struct edu *e)
{
	uint16_t status;
	int ret = config_rw(e, 6, &status, 2, false);

	return ret ? ret : !!(status & (1u << 3));
}

int edu_bind(const struct edu *e, const char *driver)
{
	char path[160];
	int ret;

	if (!driver) {
		sysfs_path(path, sizeof(path), e, "driver/unbind");
		ret = t_write_file(path, e->bdf);
		return ret == -ENOENT ? 0 : ret;	/* not bound */
	}
	/* new_id binds all edu devices not bound yet: say which one. */
	sysfs_path(path, sizeof(path), e, "driver_override");
	ret = t_write_file(path, driver);
	if (ret)
		return ret;
	ret = t_write_file("/sys/bus/pci/drivers_probe", e->bdf);
	t_write_file(path, "\n");
	if (ret)
		return ret;
	snprintf(path, sizeof(path), "/sys/bus/pci/drivers/%s/%s", driver, e->bdf);
	return access(path, F_OK) ? -ENODEV : 0;
}

int edu_uio_index(const struct edu *e)
{
	char path[128];
	struct dirent *d;
	int idx = -ENOENT;
	DIR *dir;

	sysfs_path(path, sizeof(path), e, "uio");
	dir = opendir(path);
	if (!dir)
		return -errno;
	while ((d = readdir(dir)))
		if (sscanf(d->d_name, "uio%d", &idx) == 1)
			break;
	closedir(dir);
	return idx;
}

static void describe(const struct edu *e, struct irq_user_dev *d, __u32 type)
{
	memset(d, 0, sizeof(*d));
	d->type = type;
	d->domain = e->domain;
	d->bus = e->bus;
	d->devfn = e->devfn;
}

const struct uli_mmio_regs edu_uli_regs = {
	.bar = 0,
	.status_off = EDU_REG_IRQ_STATUS,
	.status_mask = ~0u,
	.ack_off = EDU_REG_IRQ_ACK,
	.ack_mode = ULI_ACK_STATUS,
};

void edu_describe_mmio(const struct edu *e, struct irq_user_dev *d)
{
	describe(e, d, IRQ_USER_DEV_MMIO);
	d->mmio.bar = edu_uli_regs.bar;
	d->mmio.status_off = edu_uli_regs.status_off;
	d->mmio.status_mask = edu_uli_regs.status_mask;
	d->mmio.ack_off = edu_uli_regs.ack_off;
	d->mmio.ack_mode = edu_uli_regs.ack_mode;
}

void edu_describe_intx(const struct edu *e, struct irq_user_dev *d)
{
	describe(e, d, IRQ_USER_DEV_PCI_INTX);
}

void edu_describe_msi(const struct edu *e, struct irq_user_dev *d)
{
	describe(e, d, IRQ_USER_DEV_PCI_MSI);
}

int edu_open_clean(struct edu *e, int slot)
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

void edu_quiet(const struct edu *e)
{
	if (e->regs)
		edu_ack(e, ~0u);
}

void edu_close_clean(struct edu *e)
{
	if (!e->regs)
		return;
	edu_ack(e, ~0u);
	edu_set_intx(e, true);
	edu_close(e);
}
