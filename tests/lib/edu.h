/* SPDX-License-Identifier: MIT */
/*
 * edu.h - the QEMU edu test device from user space (PCI 1234:11e8).
 *
 * Part of the tests' helper library (tests/lib), which the examples and
 * the benchmark link too; not part of libuli's installed API.  BAR0 is mapped through sysfs; INTx is level-triggered
 * and stays asserted until the interrupt status register reads 0.
 */
#ifndef EDU_H
#define EDU_H

#include <stdbool.h>
#include <stdint.h>

#define EDU_REG_ID		0x00	/* 0x010000ed */
#define EDU_REG_LIVE		0x04	/* reads back ~value */
#define EDU_REG_IRQ_STATUS	0x24
#define EDU_REG_IRQ_RAISE	0x60	/* status |= value, synchronous */
#define EDU_REG_IRQ_ACK		0x64	/* status &= ~value */
#define EDU_ID			0x010000edu

/* The slots qemu/run puts edu devices in: 4 and 8 share a line, 5 not. */
#define EDU_SLOT_A		4
#define EDU_SLOT_B		8
#define EDU_SLOT_C		5

struct edu {
	char bdf[16];			/* "0000:00:04.0" */
	unsigned int domain, bus, devfn;
	int irq;			/* legacy INTx line, from sysfs */
	volatile uint32_t *regs;	/* BAR0 */
};

/* Enable the device, map BAR0, learn its IRQ.  0 or -errno. */
int edu_open(struct edu *e, int slot);
void edu_close(struct edu *e);

static inline uint32_t edu_read(const struct edu *e, unsigned int reg)
{
	return e->regs[reg / 4];
}

static inline void edu_write(const struct edu *e, unsigned int reg, uint32_t v)
{
	e->regs[reg / 4] = v;
}

static inline void edu_raise(const struct edu *e, uint32_t bits)
{
	edu_write(e, EDU_REG_IRQ_RAISE, bits);
}

static inline void edu_ack(const struct edu *e, uint32_t bits)
{
	edu_write(e, EDU_REG_IRQ_ACK, bits);
}

static inline uint32_t edu_status(const struct edu *e)
{
	return edu_read(e, EDU_REG_IRQ_STATUS);
}

/* Spin until the status reads 0 (someone acknowledged); false on timeout. */
bool edu_wait_clear(const struct edu *e, unsigned int timeout_ms);

/* PCI Command bit 10 (DisINTx) through sysfs config.  0 or -errno. */
int edu_set_intx(const struct edu *e, bool enabled);
/* 1 if Command bit 10 (DisINTx) is clear, 0 if set, -errno on error. */
int edu_intx_enabled(const struct edu *e);
/* PCI Status bit 3 (Interrupt Status); -errno on error. */
int edu_intx_pending(const struct edu *e);

/*
 * Bind the device to a kernel driver ("uio_pci_generic") or unbind it
 * (driver NULL).  0 or -errno.  edu_uio_index() gives N of /dev/uioN.
 */
int edu_bind(const struct edu *e, const char *driver);
int edu_uio_index(const struct edu *e);

/* edu's 0x24/0x64 status and acknowledge registers, for ULI_register_mmio(). */
struct uli_mmio_regs;
extern const struct uli_mmio_regs edu_uli_regs;

struct irq_user_dev;
/* Describe the device for /proc/irq/N/irq: the same registers. */
void edu_describe_mmio(const struct edu *e, struct irq_user_dev *d);
void edu_describe_intx(const struct edu *e, struct irq_user_dev *d);
void edu_describe_msi(const struct edu *e, struct irq_user_dev *d);

/*
 * edu_open() a device, first unbinding it from any driver a failed
 * earlier test left it bound to (the sysfs "enable" write fails with
 * EBUSY while a driver is bound); then quiesce it: status 0, INTx
 * enabled in the Command register.  0 or -errno.
 */
int edu_open_clean(struct edu *e, int slot);
/* Acknowledge everything (before closing files, in teardowns). */
void edu_quiet(const struct edu *e);
/* Leave the device as edu_open_clean() found it; safe to call twice. */
void edu_close_clean(struct edu *e);

#endif
