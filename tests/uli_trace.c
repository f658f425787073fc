// SPDX-License-Identifier: MIT
/*
 * uli_trace - root turns on the function graph tracer and return probes
 * while handlers run, return, abort on a forbidden system call and run
 * over their budget.  The ends of an upcall discard kernel frames (the
 * handler's system call, a nested interrupt's return): none of those may
 * carry a return hook, or the tracer returns to the wrong place.  The
 * functions whose frames are discarded refuse return probes; the ones
 * around them take them and see balanced calls; the kernel stays clean.
 */
#include <sys/mount.h>
#include <sys/stat.h>

#include "kselftest_harness.h"
#include "helpers.h"

#define TRACING	"/sys/kernel/tracing/"

static struct edu e;
static volatile uint64_t handled;
static void *uli;

enum mode { NORMAL, WAKE, SYSCALL, ENDLESS };
static volatile enum mode mode;

static void handler(void *arg)
{
	(void)arg;
	edu_ack(&e, edu_status(&e));
	handled++;
	switch (mode) {
	case NORMAL:
		break;
	case WAKE:
		ULI_wakeup(uli, 0);
		break;
	case SYSCALL:
		getppid();		/* the raw call: libc caches nothing here */
		break;
	case ENDLESS:
		for (;;)
			;
	}
}

static int tracefs_write(const char *file, const char *s, bool append)
{
	char path[128];

	snprintf(path, sizeof(path), TRACING "%s", file);
	return t_write_file_flags(path, s, append ? O_APPEND : O_TRUNC);
}

/* Count of lines of a tracefs file that contain needle. */
static long tracefs_count(const char *file, const char *needle)
{
	char path[128], line[512];
	long n = 0;
	FILE *f;

	snprintf(path, sizeof(path), TRACING "%s", file);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, needle))
			n++;
	fclose(f);
	return n;
}

static void tracing_off(void)
{
	tracefs_write("tracing_on", "0", false);
	tracefs_write("current_tracer", "nop", false);
	tracefs_write("events/kprobes/enable", "0", false);
	tracefs_write("kprobe_events", "", false);
	tracefs_write("set_ftrace_filter", "", false);
}

/* tracefs mounted, with kprobe events; or why not. */
static const char *tracefs_ready(void)
{
	static char why[96];

	if (access(TRACING "trace", F_OK) &&
	    mount("nodev", "/sys/kernel/tracing", "tracefs", 0, NULL)) {
		snprintf(why, sizeof(why), "no tracefs: %s", strerror(errno));
		return why;
	}
	if (access(TRACING "kprobe_events", F_OK))
		return "no kprobe events in this kernel";
	return NULL;
}

/* Raise until handled reaches want; false after 2 s. */
static bool raise_wait(uint64_t want)
{
	edu_raise(&e, 1);
	return t_wait_count(&handled, want, 2000);
}

TEST(tracers_on_during_upcalls)
{
	uint64_t i, n = t_test_n(200) + 100, base;
	struct uli_stats st;
	const char *why = tracefs_ready();
	long entries, returns;

	if (why)
		SKIP(return, "%s", why);
	ASSERT_EQ(0, edu_open(&e, EDU_SLOT_C));
	edu_ack(&e, ~0u);
	uli = ULI_register_pci(e.bdf, handler, NULL, 1, NULL, 0, ULI_INTX);
	ASSERT_NE(NULL, uli) TH_LOG("ULI_register_pci: %s", strerror(errno));
	if (strcmp(ULI_mode(uli), "upcall")) {
		ULI_destroy(uli);
		SKIP(return, "a property of the upcall");
	}
	signal(SIGSYS, SIG_IGN);
	signal(SIGXCPU, SIG_IGN);

	tracing_off();
	/* Functions whose frames an upcall's end discards: no return probe. */
	EXPECT_NE(0, tracefs_write("kprobe_events", "r:uli_t1 uli_handler_syscall\n", true));
	EXPECT_NE(0, tracefs_write("kprobe_events", "r:uli_t2 arch_uli_leave\n", true));
	EXPECT_NE(0, tracefs_write("kprobe_events", "r:uli_t3 uli_check_budget\n", true));
	/* Around them: probed at entry and return. */
	ASSERT_EQ(0, tracefs_write("kprobe_events", "p:uli_in arch_uli_run\n", true));
	ASSERT_EQ(0, tracefs_write("kprobe_events", "r:uli_out arch_uli_run\n", true));
	ASSERT_EQ(0, tracefs_write("kprobe_events", "r:uli_ie uli_irqentry_exit\n", true));
	ASSERT_EQ(0, tracefs_write("events/kprobes/enable", "1", false));
	/* The function graph tracer on everything with uli in its name. */
	ASSERT_EQ(0, tracefs_write("set_ftrace_filter", "*uli*", false));
	ASSERT_EQ(0, tracefs_write("current_tracer", "function_graph", false));
	ASSERT_EQ(0, tracefs_write("tracing_on", "1", false));

	/*
	 * Tracing makes every upcall slow under TCG, and a host that takes
	 * the vCPU away stretches it further: only the ENDLESS calls below
	 * may meet the budget.
	 */
	ASSERT_EQ(0, ULI_set_budget(uli, T_LONG_BUDGET));
	base = handled;
	mode = NORMAL;
	for (i = 1; i <= n; i++)
		ASSERT_TRUE(raise_wait(base + i)) TH_LOG("normal raise %llu", (unsigned long long)i);
	mode = WAKE;
	for (i = 1; i <= 50; i++)
		ASSERT_TRUE(raise_wait(base + n + i));
	mode = SYSCALL;
	for (i = 1; i <= 20; i++)
		ASSERT_TRUE(raise_wait(base + n + 50 + i));
	/*
	 * The budget runs from the start of the upcall's entry, which the
	 * tracer and a debug kernel stretch under TCG: at 200 us, on the
	 * KASAN kernel, three handlers were ended before they acknowledged
	 * the device, which called them again (298 calls for 295 raises, 8
	 * timeouts).  20 ms is far above any entry and still ends each one.
	 */
	ASSERT_EQ(0, ULI_set_budget(uli, 20000000));
	mode = ENDLESS;
	for (i = 1; i <= 5; i++)
		ASSERT_TRUE(raise_wait(base + n + 70 + i));
	usleep(100000);
	mode = NORMAL;
	ASSERT_EQ(0, ULI_set_budget(uli, T_LONG_BUDGET));
	for (i = 1; i <= 20; i++)
		ASSERT_TRUE(raise_wait(base + n + 75 + i)) TH_LOG("after the aborts");

	tracefs_write("tracing_on", "0", false);
	entries = tracefs_count("trace", "uli_in:");
	returns = tracefs_count("trace", "uli_out:");
	ASSERT_EQ(0, ULI_get_stats(uli, &st));
	tracing_off();

	EXPECT_EQ(20, st.aborted_syscall);
	EXPECT_EQ(5, st.aborted_timeout);
	TH_LOG("%llu calls; probes saw %ld entries, %ld returns of arch_uli_run",
	       (unsigned long long)st.calls, entries, returns);
	/* The buffer may have wrapped: balanced, and not nothing. */
	EXPECT_LT(0, entries);
	EXPECT_GE(1, labs(entries - returns));
	EXPECT_EQ(0, ULI_destroy(uli));
	edu_close(&e);
}

/*
 * An MSI registration's end never turns the device's INTx on.  The MSI
 * core does when MSI goes off; a device with an interrupt pending then
 * asserts its line until INTx is off again, while the line may be held
 * by another user (exclusively, so no handler of ours can be put on it
 * to quiet the device).  A fuzz run on one CPU met that moment: a line
 * held by a /proc reader got the level, which QEMU's IO-APIC latched
 * once the reader had gone (see DESIGN.md, "Teardown").  A return-less
 * probe on pci_intx() sees every change of INTx.
 */
TEST(msi_release_keeps_intx_off)
{
	const char *why = tracefs_ready();
	long on;

	if (why)
		SKIP(return, "%s", why);
	ASSERT_EQ(0, edu_open(&e, EDU_SLOT_C));
	edu_ack(&e, ~0u);
	tracing_off();
	tracefs_write("trace", "", false);
	ASSERT_EQ(0, tracefs_write("kprobe_events",
				   "p:uli_intx pci_intx enable=%si:s32\n", true));
	ASSERT_EQ(0, tracefs_write("events/kprobes/enable", "1", false));
	ASSERT_EQ(0, tracefs_write("tracing_on", "1", false));
	uli = ULI_register_pci(e.bdf, handler, NULL, 0, NULL, 0, ULI_MSI);
	if (!uli) {
		int err = errno;

		tracing_off();
		edu_close(&e);
		ASSERT_NE(NULL, uli) TH_LOG("ULI_register_pci: %s", strerror(err));
	}
	handled = 0;
	EXPECT_TRUE(raise_wait(1));
	EXPECT_EQ(0, ULI_destroy(uli));
	tracefs_write("tracing_on", "0", false);
	on = tracefs_count("trace", "enable=1");
	EXPECT_EQ(0, on) TH_LOG("INTx turned on %ld times by the registration", on);
	EXPECT_EQ(0, edu_intx_enabled(&e));
	tracing_off();
	edu_close(&e);
}

TEST_HARNESS_MAIN
