/* dnsload: name lookups through the C library's resolver, for the proc_dns
 * privileged test. It runs in a private mount namespace whose
 * /etc/nsswitch.conf and /etc/hosts are the files given, so that names are
 * looked up in that hosts file only and no DNS server is asked.
 *
 * usage: dnsload <hosts> <nsswitch.conf> <ok_name> <n_ok> <bad_name> <n_bad>
 * fd 3 is closed when ready; one read(0) gates the workload: n_ok
 * getaddrinfo(ok_name) that succeed, one gethostbyname(ok_name) that
 * succeeds, n_bad getaddrinfo(bad_name) that fail; then it exits. */
#define _GNU_SOURCE
#include <netdb.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct addrinfo hints, *res;
	char b;
	int i;

	if (argc != 7)
		return 2;
	if (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
	    mount(argv[1], "/etc/hosts", NULL, MS_BIND, NULL) || mount(argv[2], "/etc/nsswitch.conf", NULL, MS_BIND, NULL))
		return 3;
	close(3);
	if (read(0, &b, 1) != 1)
		return 4;
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_INET;
	hints.ai_socktype = SOCK_STREAM;
	for (i = atoi(argv[4]); i > 0; i--) {
		if (getaddrinfo(argv[3], NULL, &hints, &res) != 0)
			return 5;
		freeaddrinfo(res);
	}
	if (gethostbyname(argv[3]) == NULL)
		return 6;
	for (i = atoi(argv[6]); i > 0; i--)
		if (getaddrinfo(argv[5], NULL, &hints, &res) == 0)
			return 7;
	return 0;
}
