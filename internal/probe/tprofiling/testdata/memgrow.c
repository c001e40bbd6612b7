/* memgrow: mem_usage's ground truth. At a byte on stdin it mallocs and
 * touches every page of GROW bytes, then prints
 *   grown <bytes>
 * and exits at stdin's EOF. Protocol: closes fd 3 when ready. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define GROW (64 << 20)

int main(void)
{
	char c;
	volatile char *p;
	long i;

	close(3);
	if (read(0, &c, 1) != 1)
		return 1;
	p = malloc(GROW);
	if (!p)
		return 2;
	for (i = 0; i < GROW; i += 4096) /* every page, not optimised away */
		p[i] = 1;
	printf("grown %d\n", GROW);
	fflush(stdout);
	while (read(0, &c, 1) > 0)
		;
	return p[0] == 1 ? 0 : 3;
}
