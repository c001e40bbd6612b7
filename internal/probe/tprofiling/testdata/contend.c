/* contend: the seed's case 2. CompeteThd1 holds a mutex while it computes
 * (HOLD_MS per round, ROUNDS rounds); CompeteThd2 takes the same mutex
 * between writes to a TCP connection, so it waits in futex while
 * CompeteThd1 computes; tcp-server reads what it sends. The program's own
 * measurements, the ground truth, go to stdout:
 *   wait <tid> <start ns> <ns>   each wait of CompeteThd2 for the mutex
 *                                longer than 20 ms (CLOCK_MONOTONIC)
 *   writer <tid> <writes> <port> CompeteThd2's write() calls and the port
 *   server <tid> <reads>         tcp-server's read() calls (EOF included)
 *   burner <tid> <cpu ns>        CompeteThd1's CPU time
 *   mutex <address>              the mutex's address (pthread_sync's
 *                                lock.addr); CompeteThd2 locks it once per
 *                                write
 * Protocol: closes fd 3 when ready; a byte on stdin starts the rounds;
 * the report is printed when they are done; exits at stdin's EOF. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define ROUNDS 5
#define HOLD_MS 150

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t go;
static volatile int done;
static int lfd, port;
static long server_reads, writes;
static long server_tid, writer_tid, burner_tid;
static long long burner_cpu;
static long long waits[2 * ROUNDS * 64][2];
static int nwaits;

static long long clk(clockid_t id)
{
	struct timespec t;

	clock_gettime(id, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void nap(long ms)
{
	struct timespec t = {.tv_sec = 0, .tv_nsec = ms * 1000000L};

	nanosleep(&t, NULL);
}

static void *server(void *arg)
{
	char buf[4096];
	int c;
	ssize_t n;

	pthread_setname_np(pthread_self(), "tcp-server");
	server_tid = syscall(SYS_gettid);
	c = accept(lfd, NULL, NULL);
	if (c < 0)
		exit(2);
	pthread_barrier_wait(&go); /* every read is made while observed */
	do {
		n = read(c, buf, sizeof(buf));
		server_reads++;
	} while (n > 0);
	close(c);
	return NULL;
}

static void *burner(void *arg)
{
	long long end;
	int i;

	pthread_setname_np(pthread_self(), "CompeteThd1");
	burner_tid = syscall(SYS_gettid);
	pthread_barrier_wait(&go);
	for (i = 0; i < ROUNDS; i++) {
		pthread_mutex_lock(&m);
		end = clk(CLOCK_MONOTONIC) + HOLD_MS * 1000000LL;
		while (clk(CLOCK_MONOTONIC) < end)
			;
		pthread_mutex_unlock(&m);
		nap(20);
	}
	burner_cpu = clk(CLOCK_THREAD_CPUTIME_ID);
	done = 1;
	return NULL;
}

static void *writer(void *arg)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
	char msg[100];
	long long t0, t1;
	int s = socket(AF_INET, SOCK_STREAM, 0);

	pthread_setname_np(pthread_self(), "CompeteThd2");
	writer_tid = syscall(SYS_gettid);
	memset(msg, 'x', sizeof(msg));
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(s, (struct sockaddr *)&a, sizeof(a)))
		exit(3);
	pthread_barrier_wait(&go);
	nap(5); /* let CompeteThd1 take the mutex first */
	while (!done) {
		t0 = clk(CLOCK_MONOTONIC);
		pthread_mutex_lock(&m);
		t1 = clk(CLOCK_MONOTONIC);
		if (t1 - t0 > 20000000LL && nwaits < (int)(sizeof(waits) / sizeof(waits[0]))) {
			waits[nwaits][0] = t0;
			waits[nwaits][1] = t1 - t0;
			nwaits++;
		}
		pthread_mutex_unlock(&m);
		if (write(s, msg, sizeof(msg)) != sizeof(msg))
			exit(4);
		writes++;
		nap(5);
	}
	close(s);
	return NULL;
}

int main(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t al = sizeof(a);
	pthread_t ts, tb, tw;
	char c;
	int i;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (bind(lfd, (struct sockaddr *)&a, sizeof(a)) || listen(lfd, 1) || getsockname(lfd, (struct sockaddr *)&a, &al))
		return 1;
	port = ntohs(a.sin_port);
	pthread_barrier_init(&go, NULL, 4);
	pthread_create(&ts, NULL, server, NULL);
	pthread_create(&tb, NULL, burner, NULL);
	pthread_create(&tw, NULL, writer, NULL);
	close(3);
	if (read(0, &c, 1) != 1)
		return 1;
	pthread_barrier_wait(&go);
	pthread_join(tb, NULL);
	pthread_join(tw, NULL);
	pthread_join(ts, NULL);
	for (i = 0; i < nwaits; i++)
		printf("wait %ld %lld %lld\n", writer_tid, waits[i][0], waits[i][1]);
	printf("writer %ld %ld %d\n", writer_tid, writes, port);
	printf("server %ld %ld\n", server_tid, server_reads);
	printf("mutex %p\n", (void *)&m);
	printf("burner %ld %lld\n", burner_tid, burner_cpu);
	fflush(stdout);
	while (read(0, &c, 1) > 0)
		;
	return 0;
}
