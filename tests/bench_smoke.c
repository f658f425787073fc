// SPDX-License-Identifier: MIT
/*
 * bench_smoke - the benchmark (examples/uli-bench.c) runs every cell:
 * 100 samples and 100 round trips per method and scenario, no CDF.  It
 * must exit 0, and print a ROW with samples for every method, scenario and
 * span (uio-read's hardirq-to-handler is NA by design; the loaded
 * scenario has no round trips), among them the common entry stamp of
 * every method (the test kernel has X86_IRQ_ENTRY_STAMP), the kernel
 * floor and the upcall's own cost.  Numbers are not judged.  A
 * round-trip chain may stop at its time limit (-t 2: the upcall's is
 * throttled by the kernel after 64 re-raises), so it needs only some
 * samples.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers.h"

#define BENCH	"/bin/uli-bench"

static const char *const methods[] = {
	"upcall", "upcall-msi", "upcall-mmio", "proc-read", "proc-msi",
	"proc-mmio", "proc-epoll", "uio-read",
};
static const char *const scens[] = { "idle", "foreign", "owner", "loaded" };
static const char *const spans[] = {
	"raise-to-handler", "hardirq-to-handler", "entry-to-handler",
	"round-trip", "round-trip-xcpu",
};

#define ALL_METHODS	"upcall,upcall-msi,upcall-mmio,proc-read,proc-msi,proc-mmio,proc-epoll,uio-read"
#define NO_UPCALL	"proc-read,proc-msi,proc-mmio,proc-epoll,uio-read"

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))

/* Collected, printed after the benchmark's output. */
#define FAILED(...)	do {						\
		if (wlen < sizeof(why))					\
			wlen += snprintf(why + wlen, sizeof(why) - wlen,	\
					 "FAIL: " __VA_ARGS__);		\
	} while (0)

static char out[1 << 20];

/* The first line of text that starts with key, or NULL. */
static const char *line_with(const char *text, const char *key)
{
	const char *p;

	for (p = text; (p = strstr(p, key)); p++)
		if (p == text || p[-1] == '\n')
			return p;
	return NULL;
}

/* The samples of ROW m s span in out: -1 if missing, 0 for NA. */
static long row_samples(const char *m, const char *s, const char *span)
{
	char key[128];
	const char *p;

	snprintf(key, sizeof(key), "ROW %s %s %s ", m, s, span);
	p = line_with(out, key);
	return p ? strtol(p + strlen(key), NULL, 10) : -1;
}

int main(void)
{
	int pfd[2], status, fails = 0, single, upcall;
	static char why[4096];
	size_t wlen = 0;
	size_t len = 0, i, j, k;
	long n, want;
	ssize_t r;
	pid_t pid;

	if (access(BENCH, X_OK)) {
		printf("SKIP: %s: %s\n", BENCH, strerror(errno));
		return 77;
	}
	single = sysconf(_SC_NPROCESSORS_ONLN) < 2;
	/* A kernel that refuses registrations: the other methods still run. */
	upcall = t_uli_offered();
	if (!upcall)
		printf("INFO: /dev/uli refuses registrations here: no upcall rows\n");
	if (pipe(pfd)) {
		perror("pipe");
		return 1;
	}
	pid = fork();
	if (pid < 0) {
		perror("fork");
		return 1;
	}
	if (pid == 0) {
		dup2(pfd[1], 1);
		dup2(pfd[1], 2);
		close(pfd[0]);
		close(pfd[1]);
		execl(BENCH, BENCH, "-n", "100", "-w", "20", "-r", "100", "-t", "2",
		      "-c", "50", "-q", "-m", upcall ? ALL_METHODS : NO_UPCALL,
		      (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	while (len < sizeof(out) - 1 && (r = read(pfd[0], out + len, sizeof(out) - 1 - len)) > 0)
		len += r;
	out[len] = 0;
	close(pfd[0]);
	if (waitpid(pid, &status, 0) != pid) {
		perror("waitpid");
		return 1;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		FAILED("uli-bench exit status 0x%x\n", status);
		fails++;
	}

	for (i = 0; i < ARRAY_SIZE(methods); i++) {
		if (!upcall && !strncmp(methods[i], "upcall", 6))
			continue;
		for (j = 0; j < ARRAY_SIZE(scens); j++) {
			if (single && strcmp(scens[j], "owner"))
				continue;
			for (k = 0; k < ARRAY_SIZE(spans); k++) {
				if (!strcmp(scens[j], "loaded") &&
				    !strncmp(spans[k], "round-trip", 10))
					continue;
				n = row_samples(methods[i], scens[j], spans[k]);
				if (!strcmp(methods[i], "uio-read") &&
				    !strcmp(spans[k], "hardirq-to-handler"))
					want = 0;
				else
					want = strncmp(spans[k], "round-trip", 10) ? 90 : 1;
				if (n < 0 || (want ? n < want : n != 0)) {
					FAILED("%s %s %s: %ld samples\n",
					       methods[i], scens[j], spans[k], n);
					fails++;
				}
			}
		}
	}
	/* The kernel's floor comes from the upcall runs' stamps. */
	for (j = 0; j < (upcall ? ARRAY_SIZE(scens) : 0); j++) {
		if (single && strcmp(scens[j], "owner"))
			continue;
		n = row_samples("kernel", scens[j], "raise-to-handler");
		if (n < 90) {
			FAILED("kernel %s: %ld samples\n", scens[j], n);
			fails++;
		}
	}
	for (i = 0; i < (upcall ? 3 : 0); i++) {
		static const char *const owns[] = {
			"upcall-own", "upcall-msi-own", "upcall-mmio-own",
		};
		const char *own = owns[i];

		if (row_samples(own, "owner", "own-total") < 1) {
			FAILED("no %s samples\n", own);
			fails++;
		}
	}
	if (!line_with(out, "TSC ") || !line_with(out, "NULL getppid ")) {
		FAILED("no TSC or null-syscall line\n");
		fails++;
	}
	if (fails) {
		fputs(out, stdout);
		fputs(why, stdout);
		return 1;
	}
	printf("PASS: every cell ran\n");
	return 0;
}
