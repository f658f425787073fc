// SPDX-License-Identifier: MIT
/*
 * outside.c - a program built against an installed libuli with nothing
 * but `pkg-config --cflags --libs libuli` (make check-install).  It
 * registers nothing and never opens /dev/uli, so it runs on any host:
 * what it checks is that <uli.h> compiles and the symbols link.
 */
#include <stdio.h>
#include <uli.h>

int main(void)
{
	/* volatile: the references stay in the program, linked from libuli.a */
	void *(*volatile reg)(const char *, uli_func_t, void *, int, void *,
			      int, int) = ULI_register_pci;
	int (*volatile sleep_fn)(void *, int) = ULI_sleep;
	int (*volatile destroy_fn)(void *) = ULI_destroy;
	struct uli_stats st = { 0 };

	printf("ULI_DEFAULT_BUDGET_NS %u\n", ULI_DEFAULT_BUDGET_NS);
	printf("ULI_INTX %#x ULI_MSI %#x\n", ULI_INTX, ULI_MSI);
	printf("struct uli_stats: %zu bytes\n", sizeof(st));
	printf("ULI_register_pci, ULI_sleep, ULI_destroy linked: %s\n",
	       reg && sleep_fn && destroy_fn ? "yes" : "no");
	return reg && sleep_fn && destroy_fn ? 0 : 1;
}
