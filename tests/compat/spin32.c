// SPDX-License-Identifier: MIT
/*
 * spin32 - the 32-bit task that tests/uli_compat's upcalls interrupt.
 *
 *   spin32 FD        FD: a shared memory file of one page, compat.h's
 *                    struct compat_shared
 *
 * Until the page's stop word is set, runs blocks of a loop, in assembly,
 * that keeps known values in %eax, %ebx, %ecx, %edx, %esi, %edi, %ebp and
 * %xmm0-%xmm6 and checks them at every iteration, checks the selectors
 * (%cs, %ds, %es, %fs, %gs, %ss) against their values at start, reads a
 * __thread word through %gs, checks it and writes it back incremented,
 * and every SYS_PERIOD iterations makes two system calls with the
 * registers still loaded: getpid() by int $0x80 and getppid() through the
 * vDSO's __kernel_vsyscall (AT_SYSINFO; sysenter or syscall, whichever
 * the kernel patched in), and checks their results.  Between blocks it
 * calls glibc's syscall(SYS_getpid) and getppid(), which go through the
 * vDSO as well, and checks the TLS word from C.  Every mismatch is
 * counted in the page; the exit status is 0 when there was none, 1
 * otherwise, 2 on a usage or setup error.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "compat.h"

/* Iterations of the loop per block (a few ms under TCG), and between calls. */
#define BLOCK		20000
#define SYS_PERIOD	512

/* Shared with the assembly below by name: global, never optimised away. */
const uint32_t xpat[4] __attribute__((aligned(16), used)) = {
	0x5a5a0011, 0x5a5a0012, 0x5a5a0013, 0x5a5a0014,
};
__thread uint32_t tls_word __attribute__((used));
uint32_t tls_mirror __attribute__((used));
uint16_t sel_cs __attribute__((used)), sel_ds __attribute__((used)),
	 sel_es __attribute__((used)), sel_fs __attribute__((used)),
	 sel_gs __attribute__((used)), sel_ss __attribute__((used));
uint32_t my_pid __attribute__((used)), my_ppid __attribute__((used));
uint32_t vsyscall __attribute__((used));
uint32_t loops_left __attribute__((used)), sys_left __attribute__((used));
uint32_t n_int80 __attribute__((used)), n_vsys __attribute__((used));
uint32_t bad_gpr __attribute__((used)), bad_xmm __attribute__((used)),
	 bad_seg __attribute__((used)), bad_tls __attribute__((used)),
	 bad_int80 __attribute__((used)), bad_vsys __attribute__((used));
uint32_t bad_regs[7] __attribute__((used));
uint32_t bad_sel __attribute__((used)), bad_val __attribute__((used));

void spin_block(void);

#define STR_(x) #x
#define STR(x) STR_(x)

__asm__(
	"	.text\n"
	"	.globl	spin_block\n"
	"	.type	spin_block, @function\n"
	"spin_block:\n"
	"	pushl	%ebp\n"
	"	pushl	%ebx\n"
	"	pushl	%esi\n"
	"	pushl	%edi\n"
	"	.irp	r, 0,1,2,3,4,5,6\n"
	"	movdqa	xpat, %xmm\\r\n"
	"	.endr\n"
	".Lload_gpr:\n"
	"	movl	$0x5a5a0001, %eax\n"
	"	movl	$0x5a5a0002, %ebx\n"
	"	movl	$0x5a5a0003, %ecx\n"
	"	movl	$0x5a5a0004, %edx\n"
	"	movl	$0x5a5a0005, %esi\n"
	"	movl	$0x5a5a0006, %edi\n"
	"	movl	$0x5a5a0007, %ebp\n"
	".Lloop:\n"
	"	cmpl	$0x5a5a0001, %eax\n	jne	.Lbad_gpr\n"
	"	cmpl	$0x5a5a0002, %ebx\n	jne	.Lbad_gpr\n"
	"	cmpl	$0x5a5a0003, %ecx\n	jne	.Lbad_gpr\n"
	"	cmpl	$0x5a5a0004, %edx\n	jne	.Lbad_gpr\n"
	"	cmpl	$0x5a5a0005, %esi\n	jne	.Lbad_gpr\n"
	"	cmpl	$0x5a5a0006, %edi\n	jne	.Lbad_gpr\n"
	"	cmpl	$0x5a5a0007, %ebp\n	jne	.Lbad_gpr\n"
	/* %eax's pattern waits on the stack while %eax works. */
	"	pushl	%eax\n"
	"	.irp	r, 0,1,2,3,4,5,6\n"
	"	movdqa	%xmm\\r, %xmm7\n"
	"	pcmpeqd	xpat, %xmm7\n"
	"	pmovmskb %xmm7, %eax\n"
	"	cmpl	$0xffff, %eax\n"
	"	jne	.Lbad_xmm\n"
	"	.endr\n"
	"	xorl	%eax, %eax\n"
	"	.irp	s, cs,ds,es,fs,gs,ss\n"
	"	movw	%\\s, %ax\n"
	"	cmpw	sel_\\s, %ax\n"
	"	jne	.Lbad_seg\n"
	"	.endr\n"
	/* The __thread word, through %gs (local exec). */
	"	movl	%gs:tls_word@ntpoff, %eax\n"
	"	cmpl	tls_mirror, %eax\n"
	"	jne	.Lbad_tls\n"
	"	incl	%eax\n"
	"	movl	%eax, %gs:tls_word@ntpoff\n"
	"	movl	%eax, tls_mirror\n"
	"	decl	sys_left\n"
	"	jnz	.Lnext\n"
	"	movl	$" STR(SYS_PERIOD) ", sys_left\n"
	"	movl	$" STR(__NR_getpid) ", %eax\n"
	"	int	$0x80\n"
	"	cmpl	my_pid, %eax\n"
	"	jne	.Lbad_int80\n"
	"	incl	n_int80\n"
	"	cmpl	$0, vsyscall\n"
	"	je	.Lnext\n"
	"	movl	$" STR(__NR_getppid) ", %eax\n"
	"	call	*vsyscall\n"
	"	cmpl	my_ppid, %eax\n"
	"	jne	.Lbad_vsys\n"
	"	incl	n_vsys\n"
	".Lnext:\n"
	"	popl	%eax\n"
	".Lcount:\n"
	"	decl	loops_left\n"
	"	jnz	.Lloop\n"
	"	popl	%edi\n"
	"	popl	%esi\n"
	"	popl	%ebx\n"
	"	popl	%ebp\n"
	"	ret\n"
	/* Mismatches: count, note what was seen, reload, go on. */
	".Lbad_gpr:\n"
	"	movl	%eax, bad_regs\n"
	"	movl	%ebx, bad_regs+4\n"
	"	movl	%ecx, bad_regs+8\n"
	"	movl	%edx, bad_regs+12\n"
	"	movl	%esi, bad_regs+16\n"
	"	movl	%edi, bad_regs+20\n"
	"	movl	%ebp, bad_regs+24\n"
	"	incl	bad_gpr\n"
	"	decl	loops_left\n"
	"	jnz	.Lload_gpr\n"
	"	jmp	.Lcount_done\n"
	".Lbad_xmm:\n"
	"	incl	bad_xmm\n"
	"	.irp	r, 0,1,2,3,4,5,6\n"
	"	movdqa	xpat, %xmm\\r\n"
	"	.endr\n"
	"	jmp	.Lnext\n"
	".Lbad_seg:\n"
	"	movl	%eax, bad_sel\n"
	"	incl	bad_seg\n"
	"	jmp	.Lnext\n"
	".Lbad_tls:\n"
	"	movl	%eax, bad_val\n"
	"	movl	%eax, tls_mirror\n"
	"	incl	bad_tls\n"
	"	jmp	.Lnext\n"
	".Lbad_int80:\n"
	"	movl	%eax, bad_val\n"
	"	incl	bad_int80\n"
	"	jmp	.Lnext\n"
	".Lbad_vsys:\n"
	"	movl	%eax, bad_val\n"
	"	incl	bad_vsys\n"
	"	jmp	.Lnext\n"
	".Lcount_done:\n"
	"	popl	%edi\n"
	"	popl	%esi\n"
	"	popl	%ebx\n"
	"	popl	%ebp\n"
	"	ret\n"
	"	.size	spin_block, .-spin_block\n");

/* What __kernel_vsyscall enters the kernel with: its first such opcode. */
static uint32_t vdso_entry(const uint8_t *p)
{
	int i;

	if (!p)
		return VDSO_NONE;
	for (i = 0; i < 24; i++) {
		if (p[i] == 0x0f && p[i + 1] == 0x34)
			return VDSO_SYSENTER;
		if (p[i] == 0x0f && p[i + 1] == 0x05)
			return VDSO_SYSCALL;
		if (p[i] == 0xcd && p[i + 1] == 0x80)
			return VDSO_INT80;
	}
	return VDSO_NONE;
}

static void publish(struct compat_shared *sh, uint32_t n_libc, uint32_t bad_libc)
{
	sh->n_int80 = n_int80;
	sh->n_vsys = n_vsys;
	sh->n_libc = n_libc;
	sh->bad_gpr = bad_gpr;
	sh->bad_xmm = bad_xmm;
	sh->bad_seg = bad_seg;
	sh->bad_tls = bad_tls;
	sh->bad_int80 = bad_int80;
	sh->bad_vsys = bad_vsys;
	sh->bad_libc = bad_libc;
	memcpy(sh->bad_regs, bad_regs, sizeof(bad_regs));
	sh->bad_sel = bad_sel;
	sh->bad_val = bad_val;
}

int main(int argc, char **argv)
{
	uint32_t n_libc = 0, bad_libc = 0, bad;
	struct compat_shared *sh;

	if (argc != 2) {
		fprintf(stderr, "usage: %s FD\n", argv[0]);
		return 2;
	}
	sh = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, atoi(argv[1]), 0);
	if (sh == MAP_FAILED) {
		perror("spin32: mmap");
		return 2;
	}
	__asm__ volatile ("movw %%cs, %0" : "=m" (sel_cs));
	__asm__ volatile ("movw %%ds, %0" : "=m" (sel_ds));
	__asm__ volatile ("movw %%es, %0" : "=m" (sel_es));
	__asm__ volatile ("movw %%fs, %0" : "=m" (sel_fs));
	__asm__ volatile ("movw %%gs, %0" : "=m" (sel_gs));
	__asm__ volatile ("movw %%ss, %0" : "=m" (sel_ss));
	sh->sel[SEL_CS] = sel_cs;
	sh->sel[SEL_DS] = sel_ds;
	sh->sel[SEL_ES] = sel_es;
	sh->sel[SEL_FS] = sel_fs;
	sh->sel[SEL_GS] = sel_gs;
	sh->sel[SEL_SS] = sel_ss;
	my_pid = getpid();
	my_ppid = getppid();
	vsyscall = getauxval(AT_SYSINFO);
	sh->bits = sizeof(long) * 8;
	sh->pid = my_pid;
	sh->vsyscall = vsyscall;
	sh->vdso_entry = vdso_entry((const uint8_t *)(uintptr_t)vsyscall);
	tls_word = tls_mirror = 1000;
	sys_left = SYS_PERIOD;

	while (!__atomic_load_n(&sh->stop, __ATOMIC_ACQUIRE)) {
		loops_left = BLOCK;
		spin_block();
		if (syscall(SYS_getpid) != (long)my_pid)
			bad_libc++;
		if ((uint32_t)getppid() != my_ppid)
			bad_libc++;
		n_libc += 2;
		if (tls_word != tls_mirror) {
			bad_tls++;
			bad_val = tls_word;
			tls_mirror = tls_word;
		}
		publish(sh, n_libc, bad_libc);
		__atomic_store_n(&sh->blocks, sh->blocks + 1, __ATOMIC_RELEASE);
	}
	publish(sh, n_libc, bad_libc);
	bad = bad_gpr + bad_xmm + bad_seg + bad_tls + bad_int80 + bad_vsys + bad_libc;
	return bad ? 1 : 0;
}
