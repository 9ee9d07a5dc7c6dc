/*
 * tunnel_load: keep-alive GETs of plain HTTP through an HTTP proxy's CONNECT tunnel, or straight to
 * the server. wrk cannot speak through a proxy's CONNECT, so bench.py's tunnel scenarios use this.
 *
 *   tunnel_load PROXYPORT TARGETPORT PATH SECONDS CONNECTIONS
 *
 * One thread, one epoll loop, CONNECTIONS non-blocking sockets to 127.0.0.1. With PROXYPORT > 0
 * each connection first sends "CONNECT 127.0.0.1:TARGETPORT" to the proxy and, after its 200,
 * speaks HTTP/1.1 keep-alive inside the tunnel; with PROXYPORT 0 it talks to 127.0.0.1:TARGETPORT
 * directly. Every connection has one request outstanding at a time (no pipelining): GET PATH,
 * read the whole answer (Content-Length bodies only), record the time from the request's write to
 * the answer's last byte, send the next, until SECONDS pass. A connection that fails (refused,
 * closed, an answer without Content-Length, a CONNECT answer other than 200, nothing for 10 s)
 * counts as an error and is opened again. At the end it prints one line:
 *
 *   requests N non2xx N errors N connects N bytes N seconds S p50_ms X p90_ms X p99_ms X max_ms X
 *
 * bytes counts what was read inside the tunnels (answer heads and bodies), as wrk's Transfer/sec
 * does; requests counts answers completed before the deadline, whatever their status (answers
 * still on their way when it passes are dropped, as wrk drops them).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum state { DIALING, PROXY_HEAD, HEAD, BODY };

struct conn {
    int fd;
    enum state st;
    char head[16384];
    int have;            /* bytes of head collected */
    long body_left;      /* bytes of body still to come */
    int status;
    double sent_at;      /* when the current request was written */
    double last_io;      /* for the 10 s silence limit */
};

static int proxy_port, target_port, ep;
static char request[1024], connect_req[256];
static int request_len, connect_len;
static long requests, non2xx, errors, connects;
static long long bytes;
static uint32_t *lat_us;  /* one latency per completed request, in microseconds */
static size_t lat_n, lat_cap;
static char scratch[1 << 18];

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void record(double seconds) {
    if (lat_n == lat_cap) {
        lat_cap = lat_cap ? lat_cap * 2 : 1 << 16;
        lat_us = realloc(lat_us, lat_cap * sizeof *lat_us);
        if (!lat_us) { perror("realloc"); exit(1); }
    }
    double us = seconds * 1e6;
    lat_us[lat_n++] = us > 4e9 ? 4000000000u : (uint32_t)us;
}

static int dial(struct conn *c) {
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (c->fd < 0) return -1;
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(proxy_port ? proxy_port : target_port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(c->fd, (struct sockaddr *)&a, sizeof a) != 0 && errno != EINPROGRESS) {
        close(c->fd);
        c->fd = -1;
        return -1;
    }
    c->st = DIALING;
    c->have = 0;
    c->last_io = now();
    struct epoll_event ev = {.events = EPOLLOUT, .data.ptr = c};
    epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
    connects++;
    return 0;
}

static void fail(struct conn *c) {
    errors++;
    if (c->fd >= 0) {
        epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
        close(c->fd);
        c->fd = -1;
    }
}

/* Small writes on a connected socket with an empty send buffer: they go out whole or fail. */
static int send_all(struct conn *c, const char *p, int n) {
    return write(c->fd, p, n) == n ? 0 : -1;
}

static int send_request(struct conn *c) {
    c->st = HEAD;
    c->have = 0;
    c->sent_at = now();
    return send_all(c, request, request_len);
}

/* Feeds bytes read from the connection to its parser; -1 on a protocol error. A completed
 * answer is counted and the next request sent at once. */
static int feed(struct conn *c, const char *p, long n) {
    while (n > 0) {
        if (c->st == BODY) {
            long take = n < c->body_left ? n : c->body_left;
            c->body_left -= take;
            p += take;
            n -= take;
        } else {
            long room = (long)sizeof c->head - 1 - c->have;
            long take = n < room ? n : room;
            memcpy(c->head + c->have, p, take);
            c->have += take;
            c->head[c->have] = 0;
            char *end = strstr(c->head, "\r\n\r\n");
            if (!end) {
                if (c->have >= (int)sizeof c->head - 1) return -1;
                p += take;
                n -= take;
                continue;
            }
            long used = (end + 4 - c->head) - (c->have - take);   /* of this chunk */
            p += used;
            n -= used;
            if (c->have < 12 || strncmp(c->head, "HTTP/1.", 7) != 0) return -1;
            c->status = atoi(c->head + 9);
            if (c->st == PROXY_HEAD) {
                if (c->status != 200 || n > 0) return -1;    /* nothing may follow before our GET */
                if (send_request(c) != 0) return -1;
                continue;
            }
            char *cl = strcasestr(c->head, "\ncontent-length:");
            if (!cl || cl > end) return -1;
            c->body_left = strtol(cl + 16, NULL, 10);
            c->st = BODY;
        }
        if (c->st == BODY && c->body_left == 0) {
            double t = now();
            requests++;
            if (c->status < 200 || c->status > 299) non2xx++;
            record(t - c->sent_at);
            if (n > 0) return -1;                              /* no pipelining: nothing may follow */
            if (send_request(c) != 0) return -1;
        }
    }
    return 0;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static double pct(double q) {
    if (!lat_n) return -1;
    size_t i = (size_t)(q * (lat_n - 1) + 0.5);
    return lat_us[i] / 1000.0;
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: %s PROXYPORT TARGETPORT PATH SECONDS CONNECTIONS\n", argv[0]);
        return 2;
    }
    proxy_port = atoi(argv[1]);
    target_port = atoi(argv[2]);
    const char *path = argv[3];
    double seconds = atof(argv[4]);
    int n = atoi(argv[5]);
    if (n < 1 || seconds <= 0 || target_port <= 0) {
        fprintf(stderr, "bad arguments\n");
        return 2;
    }
    request_len = snprintf(request, sizeof request, "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n",
                           path, target_port);
    connect_len = snprintf(connect_req, sizeof connect_req,
                           "CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n", target_port, target_port);
    ep = epoll_create1(0);
    struct conn *conns = calloc(n, sizeof *conns);
    struct epoll_event *events = calloc(n, sizeof *events);
    if (!conns || !events) { perror("calloc"); return 1; }
    double start = now(), deadline = start + seconds, last_sweep = start;
    for (int i = 0; i < n; i++)
        if (dial(&conns[i]) != 0) fail(&conns[i]);
    double t;
    while ((t = now()) < deadline) {
        int wait_ms = (int)((deadline - t) * 1000) + 1;
        int k = epoll_wait(ep, events, n, wait_ms < 100 ? wait_ms : 100);
        for (int e = 0; e < k; e++) {
            struct conn *c = events[e].data.ptr;
            if (c->fd < 0) continue;
            c->last_io = now();
            if (c->st == DIALING) {
                int err = 0;
                socklen_t len = sizeof err;
                getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
                struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
                if (err || epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev) != 0) { fail(c); continue; }
                int r;
                if (proxy_port) {
                    c->st = PROXY_HEAD;
                    r = send_all(c, connect_req, connect_len);
                } else {
                    r = send_request(c);
                }
                if (r != 0) fail(c);
                continue;
            }
            ssize_t got = read(c->fd, scratch, sizeof scratch);
            if (got < 0 && (errno == EAGAIN || errno == EINTR)) continue;
            if (got <= 0) { fail(c); continue; }
            if (c->st != PROXY_HEAD) bytes += got;
            if (feed(c, scratch, got) != 0) fail(c);
        }
        t = now();
        if (t - last_sweep >= 0.1) {
            last_sweep = t;
            for (int i = 0; i < n; i++) {
                struct conn *c = &conns[i];
                if (c->fd >= 0 && t - c->last_io > 10) fail(c);     /* silent for 10 s */
                if (c->fd < 0 && dial(c) != 0) fail(c);              /* failed: open it again */
            }
        }
    }
    double elapsed = now() - start;
    for (int i = 0; i < n; i++)
        if (conns[i].fd >= 0) close(conns[i].fd);
    qsort(lat_us, lat_n, sizeof *lat_us, cmp_u32);
    printf("requests %ld non2xx %ld errors %ld connects %ld bytes %lld seconds %.3f "
           "p50_ms %.3f p90_ms %.3f p99_ms %.3f max_ms %.3f\n",
           requests, non2xx, errors, connects, bytes, elapsed, pct(0.50), pct(0.90), pct(0.99),
           lat_n ? lat_us[lat_n - 1] / 1000.0 : -1.0);
    return 0;
}
