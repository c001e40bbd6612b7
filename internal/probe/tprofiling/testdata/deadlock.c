/* deadlock: the seed's case 1. Two threads, LockThd1 and LockThd2, each
 * take one mutex and then wait for the other's: both block in futex for
 * good. Protocol: closes fd 3 when ready; a byte on stdin starts the
 * threads; each prints "<name> <tid> <CLOCK_MONOTONIC ns>" just before
 * blocking; then main waits for stdin's EOF and exits. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t ma = PTHREAD_MUTEX_INITIALIZER, mb = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t out = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t bar;

static long long mono(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void *thd(void *arg)
{
	int first = arg != NULL;
	const char *name = first ? "LockThd1" : "LockThd2";
	pthread_mutex_t *m1 = first ? &ma : &mb, *m2 = first ? &mb : &ma;

	pthread_setname_np(pthread_self(), name);
	pthread_mutex_lock(m1);
	pthread_barrier_wait(&bar);
	pthread_mutex_lock(&out);
	printf("%s %ld %lld\n", name, (long)syscall(SYS_gettid), mono());
	fflush(stdout);
	pthread_mutex_unlock(&out);
	pthread_mutex_lock(m2); /* never returns */
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
