// SPDX-License-Identifier: MIT
/*
 * edu-proc-demo - drive QEMU's edu device from user space through
 * /proc/irq/N/irq, the three ways the kernel offers:
 *
 *  1. the classic exclusive line (edu@5): a thread blocks in read(), the
 *     line is masked from each interrupt until it reads again;
 *  2. a shared line (edu@4 and edu@8 on one IRQ): edu@4 described to the
 *     kernel (status 0x24, acknowledge 0x64) so the line stays enabled,
 *     edu@8 on the same line served by uio_pci_generic;
 *  3. libuli with ULI_MODE=proc: a registered handler called per interrupt.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <linux/irq_user.h>

#include "helpers.h"

#define ROUNDS 1000

static int die(const char *what, int err)
{
	fprintf(stderr, "edu-proc-demo: %s: %s\n", what, strerror(err));
	return 1;
}

static int open_line(int irq)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/irq/%d/irq", irq);
	return open(path, O_RDONLY | O_CLOEXEC);
}

/* A non-blocking read claims the line and finds nothing pending. */
static int claim(int fd)
{
	uint32_t n;
	int fl = fcntl(fd, F_GETFL);

	fcntl(fd, F_SETFL, fl | O_NONBLOCK);
	if (read(fd, &n, sizeof(n)) >= 0 || errno != EAGAIN)
		return -1;
	return fcntl(fd, F_SETFL, fl);
}

/* 1: raise, block in read(), acknowledge; time each wake-up. */
static int exclusive_line(void)
{
	uint64_t total = 0, worst = 0, t0, dt;
	struct edu e;
	uint32_t n;
	int fd, i, ret;

	ret = edu_open(&e, EDU_SLOT_C);
	if (ret)
		return die("edu@5", -ret);
	fd = open_line(e.irq);
	if (fd < 0)
		return die("open /proc/irq/N/irq", errno);
	/*
	 * Claim the line before the first raise: QEMU's IO-APIC only sees a
	 * level that rises after the line is started (see DESIGN.md).
	 */
	if (claim(fd))
		return die("claim", errno);
	for (i = 0; i < ROUNDS; i++) {
		/* The raise is synchronous: the read below finds it or waits. */
		t0 = t_now_ns();
		edu_raise(&e, 1);
		if (read(fd, &n, sizeof(n)) != sizeof(n) || n != 1)
			return die("read", errno ? errno : EPROTO);
		dt = t_now_ns() - t0;
		total += dt;
		worst = dt > worst ? dt : worst;
		edu_ack(&e, 1);
	}
	close(fd);
	printf("1. exclusive IRQ %d (edu@5): %d interrupts read, raise-to-read mean %llu ns, max %llu ns\n",
	       e.irq, ROUNDS, (unsigned long long)(total / ROUNDS), (unsigned long long)worst);
	edu_close(&e);
	return 0;
}

/* 2: two devices on one line, one of them served by a kernel driver. */
static int shared_line(void)
{
	struct irq_user_dev d4;
	struct irq_user_event ev;
	struct edu e4, e8;
	uint32_t uio_base, uio_now = 0;
	char path[32];
	int fd4, uio, i, ret;

	ret = edu_open(&e4, EDU_SLOT_A);
	if (!ret)
		ret = edu_open(&e8, EDU_SLOT_B);
	if (ret)
		return die("edu@4/edu@8", -ret);

	/* edu@8: uio_pci_generic, the way UIO users do it today. */
	ret = edu_bind(&e8, "uio_pci_generic");
	if (ret)
		return die("bind uio_pci_generic to edu@8", -ret);
	snprintf(path, sizeof(path), "/dev/uio%d", edu_uio_index(&e8));
	uio = open(path, O_RDWR | O_CLOEXEC);
	if (uio < 0)
		return die(path, errno);
	/* read() returns the cumulative count: note where it starts. */
	snprintf(path, sizeof(path), "/sys/class/uio/uio%d/event", edu_uio_index(&e8));
	{
		FILE *f = fopen(path, "r");

		if (!f || fscanf(f, "%u", &uio_base) != 1)
			return die(path, errno);
		fclose(f);
	}

	/* edu@4: described, so the kernel acknowledges it and shares. */
	fd4 = open_line(e4.irq);
	if (fd4 < 0)
		return die("open", errno);
	edu_describe_mmio(&e4, &d4);
	if (ioctl(fd4, IRQ_USER_SET_DEVICE, &d4))
		return die("IRQ_USER_SET_DEVICE", errno);

	for (i = 0; i < ROUNDS; i++) {
		edu_raise(&e4, 1);
		if (!edu_wait_clear(&e4, 1000))
			return die("edu@4 not acknowledged by the kernel", ETIMEDOUT);
		edu_raise(&e8, 2);
		if (read(uio, &uio_now, 4) != 4)
			return die("read uio", errno);
		edu_ack(&e8, 2);
		edu_set_intx(&e8, true);	/* uio_pci_generic masked it */
	}
	if (read(fd4, &ev, sizeof(ev)) != sizeof(ev))
		return die("read", errno);
	printf("2. shared IRQ %d: edu@4 through /proc with a description: %u of %d interrupts;\n"
	       "   edu@8 (IRQ %d) through uio_pci_generic: %u of %d interrupts\n",
	       e4.irq, ev.count, ROUNDS, e8.irq, uio_now - uio_base, ROUNDS);
	close(fd4);
	close(uio);
	edu_bind(&e8, NULL);
	edu_close(&e4);
	edu_close(&e8);
	return ev.count == ROUNDS && uio_now - uio_base == ROUNDS ? 0 : 1;
}

/* 3: libuli, proc method: the handler acknowledges, a thread sleeps. */
static struct edu e5;
static volatile unsigned int handled;

static void handler(void *arg)
{
	edu_ack(&e5, edu_status(&e5));
	handled++;
	ULI_wakeup(*(void **)arg, 0);
}

static int libuli_proc(void)
{
	static void *self;
	void *uli;
	int i, ret;

	ret = edu_open(&e5, EDU_SLOT_C);
	if (ret)
		return die("edu@5", -ret);
	setenv("ULI_MODE", "proc", 1);
	uli = ULI_register_pci(e5.bdf, handler, &self, 1, NULL, 0, ULI_INTX);
	if (!uli)
		return die("ULI_register_pci", errno);
	self = uli;
	for (i = 0; i < ROUNDS; i++) {
		unsigned int before = handled;

		edu_raise(&e5, 1);
		while (handled == before)
			ULI_sleep(uli, 0);
	}
	printf("3. libuli (ULI_MODE=%s) on %s, IRQ %d: %u handler calls for %d interrupts\n",
	       ULI_mode(uli), e5.bdf, ULI_irq(uli), handled, ROUNDS);
	ULI_destroy(uli);
	edu_close(&e5);
	return handled == ROUNDS ? 0 : 1;
}

int main(void)
{
	printf("edu-proc-demo: user-space interrupt handling through /proc/irq/N/irq\n");
	if (exclusive_line() || shared_line() || libuli_proc())
		return 1;
	printf("edu-proc-demo: done\n");
	return 0;
}
