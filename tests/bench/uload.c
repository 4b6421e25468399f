/* SPDX-License-Identifier: MIT */
/*
 * uload: a small closed-loop HTTP/1.1 load generator for a Unix socket or a
 * loopback TCP port (wrk cannot speak to Unix sockets). One thread, epoll,
 * N keep-alive connections, each with one request in flight; runs for D
 * seconds (and at most M requests), then prints one line of results:
 *
 *   requests=R seconds=S rps=X p50_us=A p90_us=B p99_us=C max_us=D non200=E errors=F
 *
 * Built by tests/bench/api.py at run time:  cc -O2 -o uload uload.c
 * Usage: uload [-c conns] [-d seconds] [-m maxreq] [-p /path] unix:/sock | HOST:PORT
 */
#define _GNU_SOURCE
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define BUFSZ 65536

struct conn {
	int	 fd;
	size_t	 sent;		/* bytes of the request written */
	size_t	 have;		/* bytes of the response read */
	uint64_t t_start;	/* ns, request start */
	char	 buf[BUFSZ];
};

static const char *target;
static int is_unix;
static struct sockaddr_un sun_addr;
static struct sockaddr_in sin_addr;
static char req[1024];
static size_t req_len;
static int epfd;
static uint32_t *lat;		/* latencies in ns (capped at ~4.29 s) */
static size_t nlat, maxreq;
static unsigned long non200, errors;

static uint64_t
now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void
die(const char *what)
{
	perror(what);
	exit(2);
}

static int
open_conn(void)
{
	int fd;
	if (is_unix) {
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0)
			die("socket");
		if (connect(fd, (struct sockaddr *)&sun_addr, sizeof sun_addr) < 0 &&
		    errno != EINPROGRESS && errno != EAGAIN)
			die("connect");
	} else {
		int one = 1;
		fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0)
			die("socket");
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		if (connect(fd, (struct sockaddr *)&sin_addr, sizeof sin_addr) < 0 &&
		    errno != EINPROGRESS)
			die("connect");
	}
	return fd;
}

static void
arm(struct conn *c, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = c };
	if (epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &ev) < 0)
		die("epoll_ctl");
}

static void
start_request(struct conn *c)
{
	c->sent = 0;
	c->have = 0;
	c->t_start = now_ns();
	arm(c, EPOLLOUT);
}

static void
reconnect(struct conn *c)
{
	struct epoll_event ev = { .events = EPOLLOUT, .data.ptr = c };
	epoll_ctl(epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	c->fd = open_conn();
	if (epoll_ctl(epfd, EPOLL_CTL_ADD, c->fd, &ev) < 0)
		die("epoll_ctl");
	c->sent = 0;
	c->have = 0;
	c->t_start = now_ns();
}

/* 1 = a full response is in c->buf (its length in *len), 0 = need more, -1 bad */
static int
response_complete(struct conn *c, size_t *len, int *status, int *close_after)
{
	char *end = memmem(c->buf, c->have, "\r\n\r\n", 4);
	if (end == NULL)
		return c->have >= BUFSZ ? -1 : 0;
	size_t hlen = (size_t)(end - c->buf) + 4;
	long clen = -1;
	*close_after = 0;
	if (c->have < 12 || memcmp(c->buf, "HTTP/1.", 7) != 0)
		return -1;
	*status = atoi(c->buf + 9);
	for (char *p = memchr(c->buf, '\n', hlen); p && p < end; p = memchr(p + 1, '\n', (size_t)(end - p))) {
		char *l = p + 1;
		if (strncasecmp(l, "Content-Length:", 15) == 0)
			clen = strtol(l + 15, NULL, 10);
		else if (strncasecmp(l, "Connection:", 11) == 0) {
			char *v = l + 11;
			while (*v == ' ')
				v++;
			if (strncasecmp(v, "close", 5) == 0)
				*close_after = 1;
		}
	}
	if (clen < 0)
		return -1;
	if (c->have < hlen + (size_t)clen)
		return 0;
	*len = hlen + (size_t)clen;
	return 1;
}

static int
cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

static double
pct_us(double p)
{
	if (nlat == 0)
		return 0;
	size_t i = (size_t)(p / 100.0 * (double)(nlat - 1) + 0.5);
	return lat[i] / 1000.0;
}

int
main(int argc, char **argv)
{
	int nconns = 16, opt;
	double seconds = 10;
	const char *path = "/v1/status";
	maxreq = 20000000;

	while ((opt = getopt(argc, argv, "c:d:m:p:")) != -1) {
		switch (opt) {
		case 'c': nconns = atoi(optarg); break;
		case 'd': seconds = atof(optarg); break;
		case 'm': maxreq = strtoul(optarg, NULL, 10); break;
		case 'p': path = optarg; break;
		default:
			fprintf(stderr, "usage: uload [-c conns] [-d seconds] [-m maxreq] "
			    "[-p path] unix:/sock | HOST:PORT\n");
			return 1;
		}
	}
	if (optind != argc - 1 || nconns < 1 || nconns > 4096 || seconds <= 0 ||
	    seconds > 3600 || maxreq < 1 || maxreq > 200000000) {
		fprintf(stderr, "uload: bad arguments\n");
		return 1;
	}
	target = argv[optind];
	if (strncmp(target, "unix:", 5) == 0) {
		is_unix = 1;
		sun_addr.sun_family = AF_UNIX;
		if (strlen(target + 5) >= sizeof sun_addr.sun_path) {
			fprintf(stderr, "uload: socket path too long\n");
			return 1;
		}
		strcpy(sun_addr.sun_path, target + 5);
	} else {
		char host[64];
		const char *colon = strrchr(target, ':');
		if (colon == NULL || (size_t)(colon - target) >= sizeof host) {
			fprintf(stderr, "uload: target must be unix:/path or HOST:PORT\n");
			return 1;
		}
		memcpy(host, target, (size_t)(colon - target));
		host[colon - target] = 0;
		sin_addr.sin_family = AF_INET;
		sin_addr.sin_port = htons((uint16_t)atoi(colon + 1));
		if (inet_pton(AF_INET, host, &sin_addr.sin_addr) != 1) {
			fprintf(stderr, "uload: bad IPv4 address %s\n", host);
			return 1;
		}
	}
	req_len = (size_t)snprintf(req, sizeof req,
	    "GET %s HTTP/1.1\r\nHost: localhost\r\n\r\n", path);

	lat = malloc(maxreq * sizeof *lat);
	struct conn *conns = calloc((size_t)nconns, sizeof *conns);
	epfd = epoll_create1(EPOLL_CLOEXEC);
	if (lat == NULL || conns == NULL || epfd < 0)
		die("setup");

	uint64_t t0 = now_ns();
	uint64_t t_end = t0 + (uint64_t)(seconds * 1e9);
	for (int i = 0; i < nconns; i++) {
		struct epoll_event ev = { .events = EPOLLOUT, .data.ptr = &conns[i] };
		conns[i].fd = open_conn();
		if (epoll_ctl(epfd, EPOLL_CTL_ADD, conns[i].fd, &ev) < 0)
			die("epoll_ctl");
		conns[i].t_start = now_ns();
	}

	struct epoll_event evs[256];
	int done = 0;
	while (!done) {
		int n = epoll_wait(epfd, evs, 256, 100);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			die("epoll_wait");
		}
		uint64_t t = now_ns();
		if (t >= t_end)
			break;
		for (int i = 0; i < n && !done; i++) {
			struct conn *c = evs[i].data.ptr;
			if (evs[i].events & (EPOLLERR | EPOLLHUP) && !(evs[i].events & EPOLLIN)) {
				errors++;
				reconnect(c);
				continue;
			}
			if (evs[i].events & EPOLLOUT) {
				ssize_t w = write(c->fd, req + c->sent, req_len - c->sent);
				if (w < 0) {
					if (errno == EAGAIN)
						continue;
					errors++;
					reconnect(c);
					continue;
				}
				c->sent += (size_t)w;
				if (c->sent == req_len)
					arm(c, EPOLLIN);
				continue;
			}
			if (evs[i].events & EPOLLIN) {
				ssize_t r = read(c->fd, c->buf + c->have, BUFSZ - c->have);
				if (r <= 0) {
					if (r < 0 && errno == EAGAIN)
						continue;
					errors++;
					reconnect(c);
					continue;
				}
				c->have += (size_t)r;
				size_t len;
				int status, close_after;
				int k = response_complete(c, &len, &status, &close_after);
				if (k == 0)
					continue;
				if (k < 0) {
					errors++;
					reconnect(c);
					continue;
				}
				uint64_t d = now_ns() - c->t_start;
				lat[nlat++] = d > UINT32_MAX ? UINT32_MAX : (uint32_t)d;
				if (status != 200)
					non200++;
				if (nlat >= maxreq) {
					done = 1;
					break;
				}
				if (close_after)
					reconnect(c);
				else
					start_request(c);
			}
		}
	}
	double el = (double)(now_ns() - t0) / 1e9;
	qsort(lat, nlat, sizeof *lat, cmp_u32);
	printf("requests=%zu seconds=%.3f rps=%.1f p50_us=%.1f p90_us=%.1f p99_us=%.1f "
	    "max_us=%.1f non200=%lu errors=%lu\n", nlat, el, (double)nlat / el,
	    pct_us(50), pct_us(90), pct_us(99), nlat ? lat[nlat - 1] / 1000.0 : 0.0,
	    non200, errors);
	for (int i = 0; i < nconns; i++)
		close(conns[i].fd);
	return (nlat == 0 || errors > nlat / 100) ? 3 : 0;
}
