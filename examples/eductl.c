// SPDX-License-Identifier: MIT
/*
 * eductl - poke an edu device from the shell, for debugging and demos:
 *   eductl SLOT status|irq|raise V|ack V|intx on|off|pending
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "edu.h"

int main(int argc, char **argv)
{
	struct edu e;
	int ret;

	if (argc < 3) {
		fprintf(stderr, "usage: eductl SLOT status|irq|raise V|ack V|intx on|off|pending\n");
		return 2;
	}
	ret = edu_open(&e, (int)strtol(argv[1], NULL, 16));
	if (ret) {
		fprintf(stderr, "eductl: slot %s: %s\n", argv[1], strerror(-ret));
		return 1;
	}
	if (!strcmp(argv[2], "status"))
		printf("0x%x\n", edu_status(&e));
	else if (!strcmp(argv[2], "irq"))
		printf("%d\n", e.irq);
	else if (!strcmp(argv[2], "pending"))
		printf("%d\n", edu_intx_pending(&e));
	else if (argc > 3 && !strcmp(argv[2], "raise"))
		edu_raise(&e, (uint32_t)strtoul(argv[3], NULL, 0));
	else if (argc > 3 && !strcmp(argv[2], "ack"))
		edu_ack(&e, (uint32_t)strtoul(argv[3], NULL, 0));
	else if (argc > 3 && !strcmp(argv[2], "intx"))
		ret = edu_set_intx(&e, !strcmp(argv[3], "on"));
	else
		ret = -22;
	edu_close(&e);
	if (ret)
		fprintf(stderr, "eductl: %s\n", strerror(-ret));
	return !!ret;
}
