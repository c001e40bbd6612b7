/* memalloc: mem_glibc's ground truth. At a byte on stdin the main thread
 * mallocs N blocks of SIZE bytes in alloc_known() and frees them in
 * free_all(), then prints
 *   alloc <tid> <bytes> <blocks>
 * and exits at stdin's EOF. stdout has a static buffer, so the thread's
 * only allocations while observed are alloc_known's. Protocol: closes fd 3
 * when ready. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#define N 64
#define SIZE 4096

static void *blocks[N];
static char outbuf[4096];

__attribute__((noinline)) static void alloc_known(void)
{
	int i;

	for (i = 0; i < N; i++) {
		blocks[i] = malloc(SIZE);
		((volatile char *)blocks[i])[0] = 1;
	}
}

__attribute__((noinline)) static void free_all(void)
{
	int i;

	for (i = 0; i < N; i++)
		free(blocks[i]);
}

int main(void)
{
	char c;

	setvbuf(stdout, outbuf, _IOLBF, sizeof(outbuf));
	close(3);
	if (read(0, &c, 1) != 1)
		return 1;
	alloc_known();
	free_all();
	printf("alloc %ld %d %d\n", (long)syscall(SYS_gettid), N * SIZE, N);
	while (read(0, &c, 1) > 0)
		;
	return 0;
}
