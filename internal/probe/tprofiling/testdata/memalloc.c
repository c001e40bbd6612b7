/* memalloc: mem_glibc's and mem_usage's ground truth. At a byte on stdin
 * the main thread mallocs N blocks of SIZE bytes in alloc_known() and
 * frees them in free_all(); 50 ms later (past the test's min_aggr_dur,
 * so its events are apart) it mallocs GROW bytes in grow() and touches
 * every page of them; then it prints
 *   alloc <tid> <bytes> <blocks> <grown>
 * and exits at stdin's EOF. stdout has a static buffer, so the thread's
 * only allocations while observed are these. Protocol: closes fd 3 when
 * ready. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define N 64
#define SIZE 4096
#define GROW (64 << 20)

static void *blocks[N];
static char outbuf[4096];
static volatile char *grown;

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

__attribute__((noinline)) static void grow(void)
{
	long i;

	grown = malloc(GROW);
	if (!grown)
		exit(2);
	for (i = 0; i < GROW; i += 4096) /* every page: resident */
		grown[i] = 1;
}

int main(void)
{
	struct timespec nap = {.tv_sec = 0, .tv_nsec = 50000000};
	char c;

	setvbuf(stdout, outbuf, _IOLBF, sizeof(outbuf));
	close(3);
	if (read(0, &c, 1) != 1)
		return 1;
	alloc_known();
	free_all();
	nanosleep(&nap, NULL);
	grow();
	printf("alloc %ld %d %d %d\n", (long)syscall(SYS_gettid), N * SIZE, N, GROW);
	while (read(0, &c, 1) > 0)
		;
	return grown[0] == 1 ? 0 : 3;
}
