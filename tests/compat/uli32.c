// SPDX-License-Identifier: MIT
/*
 * uli32 - a 32-bit process tries to own a user-level interrupt
 * (tests/uli_compat, owner_refused_32bit).
 *
 *   uli32 DOMAIN BUS DEVFN
 *
 * Opens /dev/uli and makes each of its ioctls, first ULI_IOC_REGISTER
 * with a registration of PCI device DOMAIN:BUS:DEVFN by INTx masking that
 * a 64-bit process would get (struct uli_register has the same layout
 * and size, so the same ioctl number, for -m32), then the others and an
 * unknown one.  Prints "bits 32", "open FD ERRNO", one "NAME RET ERRNO"
 * line per ioctl, and "end N" (N ioctls); then holds the file until its
 * standard input ends, so that the test can look at what the kernel holds.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <linux/uli.h>

#define STACK_SIZE	(64 * 1024)

_Static_assert(sizeof(struct uli_register) == 104, "the 64-bit layout");

static char stack[STACK_SIZE] __attribute__((aligned(16)));

static void entry(void)
{
}

static void on_alarm(int sig)
{
	(void)sig;
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_alarm };	/* no SA_RESTART */
	uint64_t budget = 1000000;
	struct uli_counters st;
	struct uli_register r;
	uint32_t share = 500;
	struct uli_pin pin;
	char buf[64];
	int fd, i, ret;
	const struct {
		const char *name;
		unsigned long cmd;
		void *arg;
	} calls[] = {
		{ "REGISTER", ULI_IOC_REGISTER, &r },
		{ "STATS", ULI_IOC_STATS, &st },
		{ "SET_BUDGET", ULI_IOC_SET_BUDGET, &budget },
		{ "PIN", ULI_IOC_PIN, &pin },
		{ "SET_SHARE", ULI_IOC_SET_SHARE, &share },
		{ "BLOCK", ULI_IOC_BLOCK, NULL },
		{ "UNBLOCK", ULI_IOC_UNBLOCK, NULL },
		{ "WAKEUP", ULI_IOC_WAKEUP, NULL },
		{ "SLEEP", ULI_IOC_SLEEP, NULL },
		{ "RETURN", ULI_IOC_RETURN, NULL },
		{ "UNKNOWN", _IO(ULI_IOC_MAGIC, 0x7f), NULL },
	};

	if (argc != 4) {
		fprintf(stderr, "usage: %s DOMAIN BUS DEVFN\n", argv[0]);
		return 2;
	}
	sigaction(SIGALRM, &sa, NULL);
	memset(&r, 0, sizeof(r));
	r.source = ULI_SOURCE_PCI_INTX;
	r.domain = strtoul(argv[1], NULL, 0);
	r.bus = strtoul(argv[2], NULL, 0);
	r.devfn = strtoul(argv[3], NULL, 0);
	r.entry = (uintptr_t)entry;
	r.stack = (uintptr_t)stack;
	r.stack_size = STACK_SIZE;
	r.nsemas = 1;
	pin.addr = (uintptr_t)stack;
	pin.len = 4096;

	printf("bits %d\n", (int)sizeof(long) * 8);
	fd = open("/dev/uli", O_RDWR | O_CLOEXEC);
	printf("open %d %d\n", fd, fd < 0 ? errno : 0);
	if (fd < 0) {
		printf("end 0\n");
		return 1;
	}
	for (i = 0; i < (int)(sizeof(calls) / sizeof(calls[0])); i++) {
		alarm(5);	/* a SLEEP that waits: EINTR, not a hang */
		errno = 0;
		ret = ioctl(fd, calls[i].cmd, calls[i].arg);
		printf("%s %d %d\n", calls[i].name, ret, ret < 0 ? errno : 0);
		alarm(0);
	}
	printf("end %d\n", i);
	fflush(stdout);
	while (read(0, buf, sizeof(buf)) > 0)
		;
	close(fd);
	return 0;
}
