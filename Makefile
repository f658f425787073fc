# SPDX-License-Identifier: GPL-2.0
#
# User-space interrupt handling for x86-64 Linux 6.12: kernel patch series,
# libuli, examples and tests, all run under QEMU.
#
#   make              everything: kernel, library, examples, tests, initramfs
#   make demo         boot a guest that shows the upcall step by step, a smoke test
#   make shell        boot the guest with an interactive shell on this terminal
#   make test         run the tests in the guest, PTI on and PTI off
#   make test-debug   the same tests on a lockdep/KASAN kernel
#   make test-smp     the tests on 1 and on 4 CPUs (make test runs 2)
#   make test-rt      the tests on a PREEMPT_RT kernel (/proc method)
#   make check-series build and boot every prefix of the patch series
#   make check-distro-config  Debian's kernels with ULI on; what the test kernel
#                     lacks of Debian's amd64 (make test runs it; seconds)
#   make bench        latency benchmark in the guest: table, CSV, plot
#   make fuzz         a long run of the ABI fuzzer (FUZZ_OPS operations)
#   make install PREFIX=DIR   uli.h and libuli.a for outside programs
#   make deps         install the Debian packages the build needs
#
# Guest options (see qemu/run): ACCEL=tcg|kvm SMP=2 ICOUNT=0|1 PTI=on|off
# V=1 shows compiler command lines and, in the guest runner, the console.

BUILD    := build
KTAR     := /usr/src/linux-source-6.12.tar.xz
KSRC     := $(BUILD)/linux
KOUT     := $(BUILD)/kernel
KDBG     := $(BUILD)/kernel-debug
KRT      := $(BUILD)/kernel-rt
HDR      := $(BUILD)/headers
NPROC    := $(shell nproc 2>/dev/null || echo 2)
PREFIX   ?= /usr/local

# One series, numbered across core-patch/ (generic) and arch-patches/
# (x86): applied in the order of the numbers; 0000 is the cover letter.
PATCHES  := $(shell ls core-patch/*.patch arch-patches/*.patch 2>/dev/null | \
              awk -F/ '$$2 !~ /^0000-/ { print $$2 " " $$0 }' | sort | cut -d' ' -f2)

DEBS     := linux-source-6.12 qemu-system-x86 busybox-static nasm gcc make bc \
            flex bison libelf-dev libssl-dev cpio xz-utils patch perl gnuplot-nox \
            pkg-config man-db groff-base gcc-multilib linux-config-6.12

# CC, CFLAGS and LDFLAGS are the user's (make CC=clang CFLAGS=-O0); what
# the project needs comes in ULI_CFLAGS and ULI_LDFLAGS.  -MMD: header
# dependencies from the compiler (the .d files next to the outputs).
ifeq ($(origin CC),default)
CC       := gcc
endif
CFLAGS   ?= -O2 -g
ULI_CFLAGS  := -Wall -Wextra -Werror -std=gnu11 -D_GNU_SOURCE \
               -I$(HDR)/include -Ilibuli -MMD -MP
ULI_LDFLAGS := -static -pthread

ifeq ($(V),1)
Q :=
else
Q := @
endif
export ACCEL SMP ICOUNT PTI V

LIB_SRC  := $(wildcard libuli/*.c)
LIB_OBJ  := $(patsubst libuli/%.c,$(BUILD)/lib/%.o,$(LIB_SRC)) \
            $(patsubst asm/%.asm,$(BUILD)/lib/%.o,$(wildcard asm/*.asm))
LIBULI   := $(BUILD)/lib/libuli.a
# The helpers the tests, examples and benchmark share (tests/lib).
HLP_OBJ  := $(patsubst tests/lib/%.c,$(BUILD)/helpers/%.o,$(wildcard tests/lib/*.c))
LIBHLP   := $(BUILD)/helpers/libhelpers.a
TESTS    := $(patsubst tests/%.c,$(BUILD)/tests/%,$(wildcard tests/*.c))
# The series' own selftest (tools/testing/selftests/uli), built from the
# patched tree and run with the others.
SELFTEST := $(BUILD)/tests/selftest_uli
EXAMPLES := $(patsubst examples/%.c,$(BUILD)/examples/%,$(wildcard examples/*.c))
PROGS    := $(TESTS) $(SELFTEST) $(EXAMPLES)
# The 32-bit helpers of tests/uli_compat (tests/compat), in /bin/compat in
# the guest: not /bin/tests, whose every program the runner runs.
COMPAT   := $(patsubst tests/compat/%.c,$(BUILD)/compat/%,$(wildcard tests/compat/*.c))
# Guest shell scripts of the examples (uli-demo.sh), installed in /bin.
SCRIPTS  := $(wildcard examples/*.sh)

all: kernel initramfs

.PHONY: all deps kernel kernel-debug kernel-rt headers lib progs initramfs test \
        test-debug test-smp test-rt check-series demo shell bench fuzz install clean \
        distclean

# --- Debian packages -----------------------------------------------------
# A stamp, so that a built tree does not ask dpkg every time; `make deps`
# checks again.
deps:
	@mkdir -p $(BUILD)
	@missing=$$(for p in $(DEBS); do \
		dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; \
	done); \
	if [ -n "$$missing" ]; then \
		echo "  APT     $$missing"; \
		if [ "$$(id -u)" = 0 ]; then sudo=; else sudo=sudo; fi; \
		$$sudo apt-get install -y -q $$missing >$(BUILD)/apt.log 2>&1 || \
		{ $$sudo apt-get update -q >/dev/null 2>&1 && \
		  $$sudo apt-get install -y -q $$missing; } || \
		{ echo "apt-get failed, see $(BUILD)/apt.log"; exit 1; }; \
	fi
	@mkdir -p $(BUILD) && touch $(BUILD)/.deps

$(BUILD)/.deps:
	@mkdir -p $(BUILD)
	@$(MAKE) --no-print-directory deps

# Files the packages provide: on a fresh machine they appear with deps.
$(KTAR) /bin/busybox: | $(BUILD)/.deps
	@test -e $@ || { echo "$@ is still missing after make deps"; exit 1; }

# --- Kernel --------------------------------------------------------------
# Extract afresh when the installed source changes; a change to the series
# (a patch edited, added or removed: the directories' times) only
# re-patches the files the patches touch (qemu/patch-kernel).
$(BUILD)/.extracted: $(KTAR) | $(BUILD)/.deps
	@echo "  EXTRACT $(KTAR)"
	$(Q)rm -rf $(KSRC) $(BUILD)/applied $(BUILD)/.patched
	$(Q)mkdir -p $(KSRC) && tar -xf $(KTAR) -C $(KSRC) --strip-components=1
	$(Q)touch $@

$(BUILD)/.patched: $(BUILD)/.extracted $(PATCHES) core-patch arch-patches qemu/patch-kernel
	$(Q)qemu/patch-kernel $(KSRC) $(BUILD)/applied $(PATCHES) || \
		{ rm -f $(BUILD)/.extracted; exit 1; }
	$(Q)touch $@

# tinyconfig, then our fragment(s), then olddefconfig; every line of the
# fragments must survive, or the build stops and says which.
define kconfig
	@echo "  CONFIG  $(1)"
	$(Q)mkdir -p $(1)
	$(Q)$(MAKE) -s -C $(KSRC) O=$(abspath $(1)) tinyconfig >/dev/null
	$(Q)$(KSRC)/scripts/kconfig/merge_config.sh -m -O $(1) $(1)/.config $(2) >/dev/null
	$(Q)$(MAKE) -s -C $(KSRC) O=$(abspath $(1)) olddefconfig >/dev/null
	$(Q)qemu/check-config $(1)/.config $(2)
endef

$(KOUT)/.config: $(BUILD)/.patched qemu/kernel.config qemu/check-config
	$(call kconfig,$(KOUT),qemu/kernel.config)

$(KDBG)/.config: $(BUILD)/.patched qemu/kernel.config qemu/debug.config qemu/check-config
	$(call kconfig,$(KDBG),qemu/kernel.config qemu/debug.config)

# kbuild DIR TARGET WHAT: build TARGET of the configured tree in DIR.
define kbuild
	@echo "  KERNEL  Linux $$($(MAKE) -s -C $(KSRC) kernelversion) $(3)"
	$(Q)$(MAKE) -s -C $(KSRC) O=$(abspath $(1)) -j$(NPROC) $(2)
	$(Q)touch $@
endef

$(KOUT)/vmlinux: $(KOUT)/.config $(BUILD)/.patched
	$(call kbuild,$(KOUT),vmlinux,(from $(KTAR)))

# A bzImage: the KASAN kernel does not boot through PVH (qemu/debug.config).
KDBGIMG  := $(KDBG)/arch/x86/boot/bzImage
$(KDBGIMG): $(KDBG)/.config $(BUILD)/.patched
	$(call kbuild,$(KDBG),bzImage,debug)

$(KRT)/.config: $(BUILD)/.patched qemu/kernel.config qemu/rt.config qemu/check-config
	$(call kconfig,$(KRT),qemu/kernel.config qemu/rt.config)

$(KRT)/vmlinux: $(KRT)/.config $(BUILD)/.patched
	$(call kbuild,$(KRT),vmlinux,PREEMPT_RT)

kernel: $(KOUT)/vmlinux
kernel-debug: $(KDBGIMG)
kernel-rt: $(KRT)/vmlinux

# The patched uapi headers (irq_user.h, uli.h) for user space.  Not from
# the configured kernel's tree: headers_install needs no .config, and a
# change of configuration does not rebuild user space.
$(HDR)/.stamp: $(BUILD)/.patched
	@echo "  HEADERS $(HDR)"
	$(Q)$(MAKE) -s -C $(KSRC) O=$(abspath $(BUILD)/headers-obj) headers_install \
		INSTALL_HDR_PATH=$(abspath $(HDR)) >/dev/null
	$(Q)touch $@
headers: $(HDR)/.stamp

# --- User space: libuli, the test helpers, examples, tests ---------------
$(BUILD)/lib/%.o: libuli/%.c $(HDR)/.stamp
	@mkdir -p $(@D)
	@echo "  CC      $<"
	$(Q)$(CC) $(ULI_CFLAGS) $(CFLAGS) -c -o $@ $<

$(BUILD)/lib/%.o: asm/%.asm | $(BUILD)/.deps
	@mkdir -p $(@D)
	@echo "  NASM    $<"
	$(Q)nasm -f elf64 -o $@ $<

$(LIBULI): $(LIB_OBJ)
	@echo "  AR      $@"
	$(Q)rm -f $@ && ar rcs $@ $^

$(BUILD)/helpers/%.o: tests/lib/%.c $(HDR)/.stamp
	@mkdir -p $(@D)
	@echo "  CC      $<"
	$(Q)$(CC) $(ULI_CFLAGS) $(CFLAGS) -c -o $@ $<

$(LIBHLP): $(HLP_OBJ)
	@echo "  AR      $@"
	$(Q)rm -f $@ && ar rcs $@ $^

lib: $(LIBULI) $(LIBHLP)

$(BUILD)/helpers/% $(BUILD)/tests/% $(BUILD)/examples/%: private ULI_CFLAGS += -Itests/lib
# kselftest_harness.h's macros compare signed with unsigned and leave
# parameters unused: the selftests build it with -Wall only.
$(BUILD)/tests/% $(BUILD)/examples/%: private ULI_CFLAGS += -I$(KSRC)/tools/testing/selftests
$(BUILD)/tests/%: private ULI_CFLAGS += -Wno-unused-parameter -Wno-sign-compare -Wno-clobbered
$(BUILD)/tests/%: tests/%.c $(LIBHLP) $(LIBULI)
	@mkdir -p $(@D)
	@echo "  CC      $<"
	$(Q)$(CC) $(ULI_CFLAGS) $(CFLAGS) -o $@ $< $(LIBHLP) $(LIBULI) \
		$(ULI_LDFLAGS) $(LDFLAGS)

# As the selftests' lib.mk builds it: -Wall, the installed uapi headers.
$(SELFTEST): $(BUILD)/.patched $(HDR)/.stamp
	@mkdir -p $(@D)
	@echo "  CC      tools/testing/selftests/uli/uli_test.c"
	$(Q)$(CC) -Wall -O2 -I$(HDR)/include $(CFLAGS) -o $@ \
		$(KSRC)/tools/testing/selftests/uli/uli_test.c -static $(LDFLAGS)

$(BUILD)/examples/%: examples/%.c $(LIBHLP) $(LIBULI)
	@mkdir -p $(@D)
	@echo "  CC      $<"
	$(Q)$(CC) $(ULI_CFLAGS) $(CFLAGS) -o $@ $< $(LIBHLP) $(LIBULI) \
		$(ULI_LDFLAGS) $(LDFLAGS)

# Static i386 programs (gcc-multilib), for a kernel with IA32 emulation.
$(BUILD)/compat/%: tests/compat/%.c $(wildcard tests/compat/*.h) $(HDR)/.stamp
	@mkdir -p $(@D)
	@echo "  CC32    $<"
	$(Q)$(CC) -m32 -static -O2 -Wall -Wextra -Werror -std=gnu11 -D_GNU_SOURCE \
		-I$(HDR)/include -o $@ $<

-include $(wildcard $(BUILD)/lib/*.d $(BUILD)/helpers/*.d $(BUILD)/tests/*.d \
		     $(BUILD)/examples/*.d)

progs: $(PROGS) $(COMPAT)

# --- Initramfs: busybox, init, our programs --------------------------------
$(BUILD)/gen_init_cpio: $(BUILD)/.extracted
	$(Q)$(CC) -O2 -o $@ $(KSRC)/usr/gen_init_cpio.c

$(BUILD)/initramfs.cpio: $(BUILD)/gen_init_cpio qemu/init qemu/initramfs-list \
		tests/run-tests $(PROGS) $(COMPAT) $(SCRIPTS) /bin/busybox
	@echo "  CPIO    $@"
	$(Q)qemu/initramfs-list $(BUILD) $(PROGS) $(COMPAT) $(SCRIPTS) > $(BUILD)/initramfs.list
	$(Q)$(BUILD)/gen_init_cpio $(BUILD)/initramfs.list > $@

initramfs: $(BUILD)/initramfs.cpio

# --- Running -------------------------------------------------------------
# The guest suite, then what users run first: the installed library
# with pkg-config, make demo and make shell, as smoke tests.
test: all check-install
	$(Q)qemu/check-distro-config $(KOUT)/.config
	$(Q)qemu/run-tests $(KOUT)/vmlinux
	@echo "=== make demo, make shell"
	$(Q)qemu/run --exec 'uli-demo.sh' > $(BUILD)/demo.log 2>&1 || \
		{ cat $(BUILD)/demo.log; echo "FAIL make demo"; exit 1; }
	$(Q)echo exit | qemu/run --shell > $(BUILD)/shell.log 2>&1 || \
		{ cat $(BUILD)/shell.log; echo "FAIL make shell"; exit 1; }
	@echo "PASS make demo, make shell"

# At make test's PTI=off counts in both boots: the checks slow it down.
# 4-level paging: 6.12's KASAN misjudges an interrupt that comes while
# identify_cpu() has cleared the boot CPU's LA57 bit (a false
# "wild-memory-access" at boot; a mainline bug, see DESIGN.md).
test-debug: all kernel-debug
	$(Q)ULI_TEST_N=$${ULI_TEST_N:-20000} CMDLINE="$${CMDLINE:-} no5lvl" \
		qemu/run-tests $(KDBGIMG)

# One PTI=on boot per CPU count, at make test's PTI=off counts.
test-smp: all
	$(Q)for n in 1 4; do \
		SMP=$$n PTIS=on ULI_TEST_N=$${ULI_TEST_N:-20000} \
			qemu/run-tests $(KOUT)/vmlinux || exit 1; \
	done

# PREEMPT_RT: the whole suite, both methods, one boot with PTI on, at
# make test's PTI=off counts.
test-rt: all $(KRT)/vmlinux
	$(Q)PTIS=on EXTRA_BOOTS=0 \
		ULI_TEST_N=$${ULI_TEST_N:-20000} qemu/run-tests $(KRT)/vmlinux

# Every prefix of the series applied, checkpatch'ed, built and booted
# (qemu/check-series); the initramfs is the whole series' user space.
check-series: initramfs
	$(Q)qemu/check-series

# Debian's configurations (linux-config-6.12) must keep GENERIC_IRQ_USER
# and ULI through olddefconfig, and what Debian's amd64 kernel sets under
# arch/x86, kernel, mm and init must be in the test kernel or, with a
# reason, in qemu/distro-config.allow.  Kconfig only: seconds.
.PHONY: check-distro-config
check-distro-config: $(KOUT)/.config
	$(Q)qemu/check-distro-config $(KOUT)/.config

# examples/uli-demo.c's steps, then a latency table from uli-bench
# (examples/uli-demo.sh); non-zero exit if any step fails.
demo: all
	$(Q)qemu/run --exec 'uli-demo.sh'

# An interactive shell in the guest on this terminal; exit or Ctrl-D ends it.
shell: all
	$(Q)qemu/run --shell

# Results in build/bench/; BENCH_ARGS for qemu/bench, e.g. "--repeat 2".
bench: all
	$(Q)qemu/bench $(BENCH_ARGS)

# tests/uli_fuzz: make test runs a short pass; this is the long one.
FUZZ_OPS ?= 1000000
fuzz: all
	$(Q)TIMEOUT=$${TIMEOUT:-7200} qemu/run --exec '/bin/tests/uli_fuzz --ops $(FUZZ_OPS)'

# --- Installing libuli ---------------------------------------------------
# The header, the archive, a pkg-config file (libuli/libuli.pc.in with
# PREFIX filled in: PREFIX is where programs find libuli, so it is an
# absolute path) and the man pages.  DESTDIR, if set, is put in front of
# every path, to stage the files somewhere else than where they are used.
INSTDIR  := $(DESTDIR)$(PREFIX)

install: $(LIBULI)
	install -d $(INSTDIR)/include $(INSTDIR)/lib/pkgconfig \
		$(INSTDIR)/share/man/man3 $(INSTDIR)/share/man/man7
	install -m 644 libuli/uli.h $(INSTDIR)/include/uli.h
	install -m 644 $(LIBULI) $(INSTDIR)/lib/libuli.a
	sed 's|@PREFIX@|$(PREFIX)|g' libuli/libuli.pc.in >$(INSTDIR)/lib/pkgconfig/libuli.pc
	chmod 644 $(INSTDIR)/lib/pkgconfig/libuli.pc
	install -m 644 libuli/man/*.3 $(INSTDIR)/share/man/man3
	install -m 644 libuli/man/uli.7 $(INSTDIR)/share/man/man7

# Install into a scratch PREFIX and use it as an outside project would:
# build tests/install/outside.c with nothing but pkg-config's flags, once
# linked dynamically and once statically, and run both here (they
# register nothing and leave /dev/uli alone); find a man page for every
# function uli.h declares; render every page with all warnings on.
CHECK_PREFIX := $(abspath $(BUILD))/check-install

.PHONY: check-install
check-install:
	$(Q)rm -rf $(CHECK_PREFIX)
	@echo "  INSTALL $(CHECK_PREFIX)"
	$(Q)$(MAKE) --no-print-directory install PREFIX=$(CHECK_PREFIX) DESTDIR= >/dev/null
	@echo "  CC      tests/install/outside.c, pkg-config's flags only"
	$(Q)export PKG_CONFIG_PATH=$(CHECK_PREFIX)/lib/pkgconfig; \
	flags=$$(pkg-config --cflags --libs libuli) && \
	static=$$(pkg-config --static --cflags --libs libuli) && \
	$(CC) -Wall -Wextra -Werror -o $(CHECK_PREFIX)/outside \
		tests/install/outside.c $$flags && \
	$(CC) -Wall -Wextra -Werror -static -o $(CHECK_PREFIX)/outside-static \
		tests/install/outside.c $$static
	$(Q)$(CHECK_PREFIX)/outside && $(CHECK_PREFIX)/outside-static
	@echo "  MAN     a page for every function of uli.h; no warnings"
	$(Q)export MANPATH=$(CHECK_PREFIX)/share/man; \
	for f in $$(grep -o '\bULI_[a-z_]*(' $(CHECK_PREFIX)/include/uli.h | tr -d '(' | sort -u); do \
		case "$$(man -w $$f 2>/dev/null)" in \
		$$MANPATH/man3/*.3) ;; \
		*) echo "man -w $$f: no page in $$MANPATH"; exit 1 ;; \
		esac; \
	done; \
	cd $$MANPATH && for p in man3/*.3 man7/*.7; do \
		w=$$(groff -man -ww -z $$p 2>&1; man --warnings -l $$p 2>&1 >/dev/null); \
		[ -z "$$w" ] || { echo "$$p: $$w"; exit 1; }; \
		man -l $$p 2>/dev/null | grep -q '^NAME' || { echo "$$p: no NAME"; exit 1; }; \
	done
	@echo "  OK      check-install"

clean:
	rm -rf $(BUILD)/lib $(BUILD)/helpers $(BUILD)/tests $(BUILD)/examples $(BUILD)/compat \
		$(BUILD)/initramfs.*

distclean:
	rm -rf $(BUILD)
