// SPDX-License-Identifier: MIT
/*
 * upcall.c - the direct upcall method through /dev/uli.
 *
 * Needs a kernel with the ULI arch patches; on a kernel without /dev/uli
 * registration fails with ENODEV (set ULI_MODE=proc to use the /proc
 * method instead).
 */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "uli_internal.h"

int __uli_upcall_start(struct uli *u, const struct irq_user_dev *dev, int flags)
{
	(void)dev;
	(void)flags;
	u->ulifd = open("/dev/uli", O_RDWR | O_CLOEXEC);
	if (u->ulifd < 0)
		return errno == ENOENT ? -ENODEV : -errno;
	close(u->ulifd);
	u->ulifd = -1;
	return -ENOSYS;
}

void __uli_upcall_stop(struct uli *u)
{
	if (u->ulifd >= 0)
		close(u->ulifd);
}

int __uli_upcall_sleep(struct uli *u, int sema)
{
	(void)u;
	(void)sema;
	errno = ENOSYS;
	return -1;
}

int __uli_upcall_wakeup(struct uli *u, int sema)
{
	(void)u;
	(void)sema;
	errno = ENOSYS;
	return -1;
}

void __uli_upcall_block(struct uli *u, bool block)
{
	(void)u;
	(void)block;
}

int __uli_upcall_stats(struct uli *u, struct uli_stats *st)
{
	(void)u;
	(void)st;
	errno = ENOSYS;
	return -1;
}

int __uli_upcall_budget(struct uli *u, uint64_t ns)
{
	(void)u;
	(void)ns;
	errno = ENOSYS;
	return -1;
}
