/*
 * tls_load: keep-alive GETs over TLS, through an HTTP proxy's CONNECT or straight to the server.
 * wrk cannot speak through a proxy's CONNECT, so the TLS benchmark uses this instead.
 *
 *   tls_load HOST PORT PATH SECONDS CONNECTIONS CAFILE SNI [PROXYPORT]
 *
 * Each connection is one thread with a blocking socket: connect (to 127.0.0.1:PROXYPORT and
 * CONNECT HOST:PORT when a proxy is given), TLS handshake verified against CAFILE for SNI, then
 * GET PATH again and again until SECONDS pass. Prints "requests N errors E seconds S".
 * Responses must carry Content-Length (the benchmark's servers do).
 */
#define _GNU_SOURCE /* strcasestr */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static const char *host, *path, *sni;
static int port, proxy_port, seconds;
static SSL_CTX *ctx;
static atomic_long requests, errors;
static double deadline;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static int dial(int to_port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(to_port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) { close(fd); return -1; }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct timeval tv = {.tv_sec = 10};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

/* Sends CONNECT and reads the proxy's answer head; 0 when it is 200. */
static int proxy_connect(int fd) {
    char buf[4096];
    int n = snprintf(buf, sizeof buf, "CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n", host, port, host, port);
    if (write(fd, buf, n) != n) return -1;
    int got = 0;
    while (got < (int)sizeof buf - 1) {
        int r = read(fd, buf + got, 1); /* byte by byte: nothing after the head may be consumed */
        if (r <= 0) return -1;
        got += r;
        buf[got] = 0;
        if (got >= 4 && memcmp(buf + got - 4, "\r\n\r\n", 4) == 0) break;
    }
    return strncmp(buf, "HTTP/1.1 200", 12) == 0 ? 0 : -1;
}

/* Reads one response (a head with Content-Length, then that many bytes); 0 on success. Bytes
 * after it (none: requests are not pipelined) stay in buf, counted by *carry. */
static int read_response(SSL *ssl, char *buf, int size, int *carry) {
    int have = *carry;
    char *end;
    buf[have] = 0;
    while (!(end = strstr(buf, "\r\n\r\n"))) {
        if (have >= size - 1) return -1;
        int r = SSL_read(ssl, buf + have, size - 1 - have);
        if (r <= 0) return -1;
        have += r;
        buf[have] = 0;
    }
    int head = end - buf + 4;
    char *cl = strcasestr(buf, "\ncontent-length:");
    if (strncmp(buf, "HTTP/1.1 200", 12) != 0 || !cl || cl > end) return -1;
    long body = strtol(cl + 16, NULL, 10);
    long after = have - head;
    if (after >= body) {
        int extra = (int)(after - body);
        memmove(buf, buf + head + body, extra);
        *carry = extra;
        return 0;
    }
    for (long left = body - after; left > 0;) {
        int r = SSL_read(ssl, buf, left < size - 1 ? (int)left : size - 1);
        if (r <= 0) return -1;
        left -= r;
    }
    *carry = 0;
    return 0;
}

static void *worker(void *arg) {
    (void)arg;
    static __thread char buf[1 << 16];
    char req[1024];
    int reqlen = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: %s:%d\r\n\r\n", path, host, port);
    while (now() < deadline) {
        int fd = dial(proxy_port ? proxy_port : port);
        if (fd < 0 || (proxy_port && proxy_connect(fd) != 0)) {
            atomic_fetch_add(&errors, 1);
            if (fd >= 0) close(fd);
            usleep(10000);
            continue;
        }
        SSL *ssl = SSL_new(ctx);
        SSL_set_fd(ssl, fd);
        SSL_set_tlsext_host_name(ssl, sni);
        SSL_set1_host(ssl, sni);
        if (SSL_connect(ssl) != 1) {
            if (atomic_fetch_add(&errors, 1) == 0) ERR_print_errors_fp(stderr); /* the first one says why */
            SSL_free(ssl);
            close(fd);
            usleep(10000);
            continue;
        }
        int carry = 0;
        while (now() < deadline) {
            if (SSL_write(ssl, req, reqlen) != reqlen || read_response(ssl, buf, sizeof buf, &carry) != 0) {
                atomic_fetch_add(&errors, 1);
                break;
            }
            atomic_fetch_add(&requests, 1);
        }
        SSL_shutdown(ssl);
        SSL_free(ssl);
        close(fd);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 8) {
        fprintf(stderr, "usage: %s HOST PORT PATH SECONDS CONNECTIONS CAFILE SNI [PROXYPORT]\n", argv[0]);
        return 2;
    }
    host = argv[1];
    port = atoi(argv[2]);
    path = argv[3];
    seconds = atoi(argv[4]);
    int connections = atoi(argv[5]);
    sni = argv[7];
    proxy_port = argc > 8 ? atoi(argv[8]) : 0;
    ctx = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    if (SSL_CTX_load_verify_locations(ctx, argv[6], NULL) != 1) {
        fprintf(stderr, "cannot load %s\n", argv[6]);
        return 2;
    }
    double start = now();
    deadline = start + seconds;
    pthread_t *threads = calloc(connections, sizeof *threads);
    for (int i = 0; i < connections; i++) pthread_create(&threads[i], NULL, worker, NULL);
    for (int i = 0; i < connections; i++) pthread_join(threads[i], NULL);
    printf("requests %ld errors %ld seconds %.3f\n", atomic_load(&requests), atomic_load(&errors), now() - start);
    return 0;
}
