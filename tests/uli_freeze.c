// SPDX-License-Identifier: MIT
/*
 * uli_freeze - a frozen owner's handler does not run:
 *
 *  - cgroup_freeze: the owner, alone in a cgroup v2, is frozen with
 *    cgroup.freeze; an interrupt of its device is held (its handler does
 *    not run for 300 ms, though another CPU is idle), and delivered once
 *    the cgroup thaws, as one upcall; then upcalls go on as before.
 *  - parent_frozen: the same when the freeze is an ancestor cgroup's.
 * In both methods: under ULI_MODE=proc the handler is a thread of the
 * owner, which the freezer stops with it.  INTx on edu@5.
 */
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "kselftest_harness.h"
#include "helpers.h"

#define CG		"/sys/fs/cgroup/uli_freeze"
#define CG_CHILD	CG "/owner"

struct shared {
	volatile uint64_t handled;
	volatile int ready;		/* the owner registered (1) or failed (-errno) */
};

static struct edu e;
static struct shared *sh;

static void handler(void *arg)
{
	(void)arg;
	edu_ack(&e, edu_status(&e));
	sh->handled++;
}

/* The owner: join @cg, register, pin the shared page, wait to be killed. */
static void owner(const char *cg)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	t_owner_register(&e, cg, handler, sh, &sh->ready);
	sh->ready = 1;
	for (;;)
		pause();
}

/* Wait for cgroup.events of @cg to say frozen @want. */
static bool wait_frozen(const char *cg, int want)
{
	char path[128], buf[256], line[16];
	int i;

	snprintf(path, sizeof(path), "%s/cgroup.events", cg);
	snprintf(line, sizeof(line), "frozen %d", want);
	for (i = 0; i < 500; i++) {
		if (t_read_file(path, buf, sizeof(buf)) > 0 && strstr(buf, line))
			return true;
		t_msleep(10);
	}
	return false;
}

FIXTURE(fz) {
	pid_t pid;
};

FIXTURE_SETUP(fz)
{
	self->pid = -1;
	if (access("/sys/fs/cgroup/cgroup.procs", F_OK))
		SKIP(return, "no cgroup v2 hierarchy at /sys/fs/cgroup");
	sh = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, sh);
	ASSERT_EQ(0, edu_open_clean(&e, EDU_SLOT_C));
	rmdir(CG_CHILD);
	rmdir(CG);
	ASSERT_EQ(0, mkdir(CG, 0755));
	ASSERT_EQ(0, mkdir(CG_CHILD, 0755));
}

FIXTURE_TEARDOWN(fz)
{
	if (self->pid > 0) {
		t_write_file(CG "/cgroup.freeze", "0");
		t_write_file(CG_CHILD "/cgroup.freeze", "0");
		kill(self->pid, SIGKILL);
		waitpid(self->pid, NULL, 0);
	}
	rmdir(CG_CHILD);
	rmdir(CG);
	edu_close_clean(&e);
}

/* Freeze with @freeze_cg (the owner's cgroup or its parent); check. */
static void held_until_thaw(struct __test_metadata *_metadata, FIXTURE_DATA(fz) *self,
			    const char *freeze_cg)
{
	char path[128];
	int i;

	self->pid = fork();
	ASSERT_LE(0, self->pid);
	if (self->pid == 0)
		owner(CG_CHILD);
	for (i = 0; i < 1000 && !sh->ready; i++)
		t_msleep(10);
	ASSERT_EQ(1, sh->ready) TH_LOG("owner: %s", strerror(-sh->ready));

	edu_raise(&e, 1);
	ASSERT_TRUE(t_wait_count(&sh->handled, 1, 2000)) TH_LOG("not handled before freezing");

	snprintf(path, sizeof(path), "%s/cgroup.freeze", freeze_cg);
	ASSERT_EQ(0, t_write_file(path, "1") < 0);
	ASSERT_TRUE(wait_frozen(CG_CHILD, 1));
	edu_raise(&e, 1);
	t_msleep(300);
	EXPECT_EQ(1, sh->handled) TH_LOG("the handler ran while its owner was frozen");

	ASSERT_EQ(0, t_write_file(path, "0") < 0);
	ASSERT_TRUE(wait_frozen(CG_CHILD, 0));
	EXPECT_TRUE(t_wait_count(&sh->handled, 2, 2000)) TH_LOG("held interrupt not delivered "
								"after the thaw: %llu",
								(unsigned long long)sh->handled);
	t_msleep(50);
	EXPECT_EQ(2, sh->handled);	/* one upcall for what was held */

	for (i = 0; i < 5; i++) {
		edu_raise(&e, 1);
		t_wait_count(&sh->handled, 3 + i, 2000);
	}
	EXPECT_EQ(7, sh->handled);
}

TEST_F_TIMEOUT(fz, cgroup_freeze, 120)
{
	held_until_thaw(_metadata, self, CG_CHILD);
}

TEST_F_TIMEOUT(fz, parent_frozen, 120)
{
	held_until_thaw(_metadata, self, CG);
}

TEST_HARNESS_MAIN
