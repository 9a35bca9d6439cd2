/* LD_PRELOAD shim: getaddrinfo takes 30 s while /tmp/redl-dns-slow exists (a hung resolver) */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netdb.h>
#include <unistd.h>
int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints, struct addrinfo **res)
{
	int (*real)(const char *, const char *, const struct addrinfo *, struct addrinfo **) = dlsym(RTLD_NEXT, "getaddrinfo");
	if (access("/tmp/redl-dns-slow", F_OK) == 0)
		sleep(30);
	return real(node, service, hints, res);
}
