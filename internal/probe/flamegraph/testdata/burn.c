/* burn: a target for the flamegraph probe's privileged tests.
 *
 * Waits for a line on stdin, then:
 *   cpu <n>    spins (in spin) under burn_a for 3n loop iterations and under
 *              burn_b for n,
 *              interleaved in 20 rounds;
 *   sys <n>    writes n single bytes to /dev/null from sys_loop;
 *   sleep <ms> a second thread sleeps <ms> in 10 equal nanosleeps made from
 *              sleepy() itself (a raw syscall, so the frame-pointer walk
 *              starts inside sleepy);
 *   alloc <n>  (n even) allocates BLOCK bytes 3n times with malloc from
 *              alloc_a and n times with calloc from alloc_b; n times
 *              malloc(100) then realloc to GROWN from grow; n times
 *              realloc(NULL, BLOCK) (which calls malloc inside libc) from
 *              renew; n times posix_memalign(64, BLOCK) and
 *              aligned_alloc(64, ALIGNED) from align; then frees every
 *              alloc_b block and the first half of alloc_a's: live are
 *              3n/2 × BLOCK under alloc_a, n × GROWN under grow, n × BLOCK
 *              under renew and n × (BLOCK + ALIGNED) under align;
 *   fault <n>  (pages) writes one byte to each of 3n fresh pages of an
 *              anonymous mapping from fault_a and to each of n from
 *              fault_b: 3n and n page faults;
 * prints "done <ns>" (the CPU time, the time sleepy took, or the time the
 * alloc command took, measured; 0 for fault) and waits for stdin to close, so that its mappings
 * can still be read.
 * Build: cc -O0 -fno-omit-frame-pointer -o burn burn.c -lpthread */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/syscall.h>

volatile unsigned long sink;

/* Both hot functions run the same loop, so their CPU time is in the ratio
 * of their iterations (two copies of the loop can differ in cost per
 * iteration by their alignment alone). */
__attribute__((noinline)) void spin(unsigned long n)
{
	for (unsigned long i = 0; i < n; i++)
		sink += i * 7;
}

__attribute__((noinline)) void burn_a(unsigned long n)
{
	spin(n);
}

__attribute__((noinline)) void burn_b(unsigned long n)
{
	spin(n);
}

#if defined(__aarch64__)
static long raw_nanosleep(const struct timespec *ts)
{
	long ret;
	register long x8 __asm__("x8") = SYS_nanosleep;
	register long x0 __asm__("x0") = (long)ts;
	register long x1 __asm__("x1") = 0;
	__asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1) : "memory");
	ret = x0;
	return ret;
}
#elif !defined(__x86_64__)
#error unsupported architecture
#endif

/* raw_write: write(2) without libc (built without frame pointers, a
 * libc frame would hide its caller), inlined into its caller. */
static inline __attribute__((always_inline)) long raw_write(int fd, const void *buf, long n)
{
	long ret;
#if defined(__x86_64__)
	__asm__ volatile("syscall" : "=a"(ret) : "0"(SYS_write), "D"(fd), "S"(buf), "d"(n) : "rcx", "r11", "memory");
#elif defined(__aarch64__)
	register long x8 __asm__("x8") = SYS_write;
	register long x0 __asm__("x0") = fd;
	register long x1 __asm__("x1") = (long)buf;
	register long x2 __asm__("x2") = n;
	__asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2) : "memory");
	ret = x0;
#endif
	return ret;
}

/* sys_loop writes n bytes to /dev/null one at a time: its time is in the
 * kernel, under write(2). */
__attribute__((noinline)) void sys_loop(int fd, long n)
{
	char c = 0;

	for (long i = 0; i < n; i++)
		raw_write(fd, &c, 1);
}

#define BLOCK 4000
#define GROWN 5000
#define ALIGNED 4032
#define MAX_BLOCKS 30000

static void *blocks_a[3 * MAX_BLOCKS], *blocks_b[MAX_BLOCKS], *blocks_c[MAX_BLOCKS], *blocks_d[MAX_BLOCKS], *blocks_e[MAX_BLOCKS], *blocks_f[MAX_BLOCKS];

__attribute__((noinline)) void alloc_a(long n)
{
	for (long i = 0; i < n; i++)
		blocks_a[i] = malloc(BLOCK);
}

__attribute__((noinline)) void alloc_b(long n)
{
	for (long i = 0; i < n; i++)
		blocks_b[i] = calloc(BLOCK / 4, 4);
}

__attribute__((noinline)) void grow(long n)
{
	for (long i = 0; i < n; i++) {
		blocks_c[i] = malloc(100);
		blocks_c[i] = realloc(blocks_c[i], GROWN);
	}
}

__attribute__((noinline)) void align(long n)
{
	for (long i = 0; i < n; i++) {
		if (posix_memalign(&blocks_e[i], 64, BLOCK))
			exit(5);
		blocks_f[i] = aligned_alloc(64, ALIGNED);
	}
}

static long pg; /* the page size */

__attribute__((noinline)) void renew(long n)
{
	for (long i = 0; i < n; i++)
		blocks_d[i] = realloc(NULL, BLOCK);
}

__attribute__((noinline)) void fault_a(volatile char *p, long pages)
{
	for (long i = 0; i < pages; i++)
		p[i * pg] = 1;
}

__attribute__((noinline)) void fault_b(volatile char *p, long pages)
{
	for (long i = 0; i < pages; i++)
		p[i * pg] = 1;
}

static long sleep_ms;
static long long slept_ns;
static long long now_ns(clockid_t c);

/* sleepy is inlined into nothing: the syscall instruction is in its body. */
__attribute__((noinline)) void sleepy(long ms)
{
	struct timespec ts = { .tv_sec = (ms / 10) / 1000, .tv_nsec = ((ms / 10) % 1000) * 1000000L };
	long long t0 = now_ns(CLOCK_MONOTONIC);

	for (int i = 0; i < 10; i++) {
		long ret;
#if defined(__x86_64__)
		__asm__ volatile("syscall" : "=a"(ret) : "0"(SYS_nanosleep), "D"(&ts), "S"(0) : "rcx", "r11", "memory");
#else
		ret = raw_nanosleep(&ts);
#endif
		(void)ret;
	}
	slept_ns = now_ns(CLOCK_MONOTONIC) - t0;
}

static void *sleeper(void *arg)
{
	(void)arg;
	sleepy(sleep_ms);
	return NULL;
}

static long long now_ns(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(void)
{
	char cmd[64];
	long arg;

	setvbuf(stdout, NULL, _IONBF, 0);
	printf("ready\n");
	if (scanf("%63s %ld", cmd, &arg) != 2)
		return 2;
	if (strcmp(cmd, "cpu") == 0) {
		long long t0 = now_ns(CLOCK_PROCESS_CPUTIME_ID);

		for (int r = 0; r < 20; r++) {
			burn_a(3 * (unsigned long)arg / 20);
			burn_b((unsigned long)arg / 20);
		}
		printf("done %lld\n", now_ns(CLOCK_PROCESS_CPUTIME_ID) - t0);
	} else if (strcmp(cmd, "sys") == 0) {
		FILE *null = fopen("/dev/null", "w");
		long long t0 = now_ns(CLOCK_PROCESS_CPUTIME_ID);

		if (!null)
			return 3;
		sys_loop(fileno(null), arg);
		printf("done %lld\n", now_ns(CLOCK_PROCESS_CPUTIME_ID) - t0);
	} else if (strcmp(cmd, "sleep") == 0) {
		pthread_t t;

		sleep_ms = arg;
		pthread_create(&t, NULL, sleeper, NULL);
		pthread_join(t, NULL);
		printf("done %lld\n", slept_ns);
	} else if (strcmp(cmd, "alloc") == 0 && arg > 0 && arg <= MAX_BLOCKS && arg % 2 == 0) {
		long long t0 = now_ns(CLOCK_MONOTONIC);

		alloc_a(3 * arg);
		alloc_b(arg);
		grow(arg);
		renew(arg);
		align(arg);
		for (long i = 0; i < arg; i++)
			free(blocks_b[i]);
		for (long i = 0; i < 3 * arg / 2; i++)
			free(blocks_a[i]);
		printf("done %lld\n", now_ns(CLOCK_MONOTONIC) - t0);
	} else if (strcmp(cmd, "fault") == 0 && arg > 0) {
		size_t len;
		char *p;

		pg = sysconf(_SC_PAGESIZE);
		len = 4 * (size_t)arg * pg;
		p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED)
			return 4;
		madvise(p, len, MADV_NOHUGEPAGE); /* one fault per page */
		fault_a(p, 3 * arg);
		fault_b(p + 3 * arg * pg, arg);
		munmap(p, len);
		printf("done 0\n");
	} else {
		return 2;
	}
	while (fgetc(stdin) != EOF)
		;
	return 0;
}
