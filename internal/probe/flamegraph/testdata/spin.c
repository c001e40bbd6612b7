/* spin: the CPU-bound target of the flamegraph benchmarks
 * (bench_privileged_test.go).
 *
 *   spin           prints "ready", then for each line "<n>" on stdin spins
 *                  n loop iterations (in work, under hot) and prints
 *                  "<cpu ns> <wall ns>" of the round (CLOCK_PROCESS_CPUTIME_ID
 *                  and CLOCK_MONOTONIC); exits at EOF.
 *   spin duty <on> <period>  prints "ready", then spins <on> ms of every
 *                  <period> ms (sleeping the rest) until stdin closes.
 * Build: cc -O0 -fno-omit-frame-pointer -o spin spin.c */
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

volatile unsigned long sink;

__attribute__((noinline)) void work(unsigned long n)
{
	for (unsigned long i = 0; i < n; i++)
		sink += i * 7;
}

__attribute__((noinline)) void hot(unsigned long n)
{
	work(n);
}

static long long now_ns(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	printf("ready\n");
	if (argc == 4 && strcmp(argv[1], "duty") == 0) {
		long on = atol(argv[2]), period = atol(argv[3]);
		struct pollfd p = { .fd = 0, .events = POLLIN };

		for (;;) {
			long long end = now_ns(CLOCK_MONOTONIC) + on * 1000000LL;

			while (now_ns(CLOCK_MONOTONIC) < end)
				hot(10000);
			if (poll(&p, 1, period - on) != 0)
				return 0; /* stdin closed */
		}
	}
	unsigned long n;

	while (scanf("%lu", &n) == 1) {
		long long c0 = now_ns(CLOCK_PROCESS_CPUTIME_ID), w0 = now_ns(CLOCK_MONOTONIC);

		hot(n);
		printf("%lld %lld\n", now_ns(CLOCK_PROCESS_CPUTIME_ID) - c0, now_ns(CLOCK_MONOTONIC) - w0);
	}
	return 0;
}
