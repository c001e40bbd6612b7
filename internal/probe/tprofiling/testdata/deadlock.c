/* deadlock: the seed's case 1. Two threads, LockThd1 and LockThd2, each
 * take one mutex and then wait for the other's: both block in futex for
 * good. Protocol: closes fd 3 when ready; a byte on stdin starts the
 * threads; each prints "<name> <tid> <CLOCK_MONOTONIC ns>" just before
 * blocking; then main waits for stdin's EOF and exits.
 * The two locks are the program's own futex mutexes, so the futex call
 * is made from frame-pointer code (built -fno-omit-frame-pointer) through
 * libc's syscall() (which keeps the frame pointer): the kernel's walk
 * from there reaches thd, which glibc's pthread_mutex_lock (no frame
 * pointers) would hide. */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* A futex mutex: 0 free, 1 taken, 2 taken with waiters. */
static int ma, mb;
static pthread_mutex_t out = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t bar;

static long long mono(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

__attribute__((noinline)) static void futex_wait(int *m)
{
	syscall(SYS_futex, m, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
}

__attribute__((noinline)) static void mutex_lock(int *m)
{
	int c = __sync_val_compare_and_swap(m, 0, 1);

	while (c != 0) {
		if (c == 2 || __sync_val_compare_and_swap(m, 1, 2) != 0)
			futex_wait(m);
		c = __sync_val_compare_and_swap(m, 0, 2);
	}
}

__attribute__((noinline)) static void *thd(void *arg)
{
	int first = arg != NULL;
	const char *name = first ? "LockThd1" : "LockThd2";
	int *m1 = first ? &ma : &mb, *m2 = first ? &mb : &ma;

	pthread_setname_np(pthread_self(), name);
	mutex_lock(m1);
	pthread_barrier_wait(&bar);
	pthread_mutex_lock(&out);
	printf("%s %ld %lld\n", name, (long)syscall(SYS_gettid), mono());
	fflush(stdout);
	pthread_mutex_unlock(&out);
	mutex_lock(m2); /* never returns */
	return NULL;
}

int main(void)
{
	pthread_t t1, t2;
	char c;

	close(3);
	if (read(0, &c, 1) != 1)
		return 1;
	pthread_barrier_init(&bar, NULL, 2);
	pthread_create(&t1, NULL, thd, (void *)1);
	pthread_create(&t2, NULL, thd, NULL);
	while (read(0, &c, 1) > 0)
		;
	_exit(0);
}
