; SPDX-License-Identifier: MIT
;
; uli_trampoline.asm - where every upcall starts, in user mode.
;
; The kernel enters here with all general registers zero but %rdi, which
; points at the registration's struct __uli_tramp (see uli_internal.h),
; %rsp at the top of the handler's stack (16-byte aligned), the FS base
; libuli gave at registration (the TCB of the handler's own TLS block,
; libuli/image.c), a clean FPU state and only IF set in RFLAGS.  The
; struct, the stack and the TLS block are pinned: they cannot fault.
; We call func(arg) like any C function, then enter the restore device:
; ioctl(fd, ULI_IOC_RETURN), which never returns here.

bits 64
default rel

%define TRAMP_FUNC	0
%define TRAMP_ARG	8
%define TRAMP_FD	16
%define SYS_ioctl	16
%define ULI_IOC_RETURN	0xb911		; _IO(0xB9, 0x11)

section .text

global __uli_trampoline:function (__uli_trampoline.end - __uli_trampoline)
__uli_trampoline:
	mov	rbx, rdi		; callee-saved: survives the call
	mov	rax, [rbx + TRAMP_FUNC]
	mov	rdi, [rbx + TRAMP_ARG]
	call	rax			; rsp + 8 is 16-byte aligned in func
	mov	edi, [rbx + TRAMP_FD]
	mov	esi, ULI_IOC_RETURN
	mov	eax, SYS_ioctl
	syscall
	ud2				; not reached: the kernel resumes elsewhere
.end:

section .note.GNU-stack noalloc noexec nowrite progbits
