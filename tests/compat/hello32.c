// SPDX-License-Identifier: MIT
/*
 * hello32 - tests/uli_compat's probe: exits 0 when the kernel runs it.
 * A kernel without IA32 emulation refuses the exec with ENOEXEC.
 */
int main(void)
{
	return sizeof(long) == 4 ? 0 : 1;
}
