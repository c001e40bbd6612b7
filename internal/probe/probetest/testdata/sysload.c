/* sysload: a known number of syscalls of each class the proc probe times,
 * for privileged tests (ground truth). Built with gcc by probetest.Sysload.
 *
 * usage: sysload <reads> <writes> <failures> <yields> <futex_ms> <epoll_ms> <fsync_path> [<file>...]
 * fd 3: closed when ready (everything before is start-up); then one
 *   read(0) of one byte gates the workload; fd 4 is closed when it is done;
 *   then one read(0) waits for stdin to close, and the process exits.
 * Workload, in order: <reads> read(2) of 4096 bytes from /dev/zero,
 *   <writes> write(2) of 100 bytes to /dev/null, <failures> close(-1)
 *   (EBADF), <yields> sched_yield(2), one futex(2) FUTEX_WAIT timing out
 *   after <futex_ms> (ETIMEDOUT: a failure), one epoll_wait(2) and one
 *   epoll_pwait(2) on an empty epoll set with <epoll_ms> timeouts, one
 *   write(2) + fsync(2) + ioctl(2) FS_IOC_GETFLAGS of <fsync_path>, one fork(2) (x86_64 only), one
 *   vfork(2) and one clone(2) whose children _exit(0) at once, each waited;
 *   then for each <file>: one open(2) (O_RDWR|O_CREAT), three write(2) of
 *   100 bytes, two pread64(2) of 100 bytes, one fsync(2) and close(2).
 * So: reads+1 read, writes+1+3*files write, failures+1 failed syscalls
 * (no other call of the workload fails). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char stack[64 * 1024];

static int child(void *arg) { (void)arg; _exit(0); }

int main(int argc, char **argv)
{
	static char buf[4096];
	struct epoll_event ev;
	struct timespec ts;
	int futex_word = 0, zero, null, ep, fs, i;
	long flags;
	pid_t pid;

	if (argc < 8)
		return 2;
	zero = open("/dev/zero", O_RDONLY);
	null = open("/dev/null", O_WRONLY);
	fs = open(argv[7], O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ep = epoll_create1(0);
	if (zero < 0 || null < 0 || fs < 0 || ep < 0)
		return 3;
	close(3);
	if (read(0, buf, 1) != 1)
		return 4;
	for (i = atoi(argv[1]); i > 0; i--)
		if (read(zero, buf, sizeof(buf)) != sizeof(buf))
			return 5;
	for (i = atoi(argv[2]); i > 0; i--)
		if (write(null, buf, 100) != 100)
			return 6;
	for (i = atoi(argv[3]); i > 0; i--)
		close(-1);
	for (i = atoi(argv[4]); i > 0; i--)
		sched_yield();
	ts.tv_sec = atoi(argv[5]) / 1000;
	ts.tv_nsec = (long)(atoi(argv[5]) % 1000) * 1000000L;
	syscall(SYS_futex, &futex_word, FUTEX_WAIT_PRIVATE, 0, &ts, NULL, 0);
	epoll_wait(ep, &ev, 1, atoi(argv[6]));
	epoll_pwait(ep, &ev, 1, atoi(argv[6]), NULL);
	if (write(fs, buf, 100) != 100 || fsync(fs) != 0)
		return 7;
	if (ioctl(fs, FS_IOC_GETFLAGS, &flags) != 0)
		return 12;
#ifdef SYS_fork
	pid = syscall(SYS_fork);
	if (pid == 0)
		_exit(0);
	waitpid(pid, NULL, 0);
#endif
	pid = vfork();
	if (pid == 0)
		_exit(0);
	waitpid(pid, NULL, 0);
	pid = clone(child, stack + sizeof(stack), SIGCHLD, NULL);
	waitpid(pid, NULL, 0);
	for (i = 8; i < argc; i++) {
		int fd = open(argv[i], O_RDWR | O_CREAT, 0600);

		if (fd < 0)
			return 8;
		if (write(fd, buf, 100) != 100 || write(fd, buf, 100) != 100 || write(fd, buf, 100) != 100)
			return 9;
		if (pread(fd, buf, 100, 0) != 100 || pread(fd, buf, 100, 100) != 100)
			return 10;
		if (fsync(fd) != 0)
			return 11;
		close(fd);
	}
	close(4);
	read(0, buf, 1);
	return 0;
}
