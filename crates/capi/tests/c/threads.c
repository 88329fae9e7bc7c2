/*
 * Many threads, one stack: THREADS threads each connect to a kernel echo server,
 * send BYTES bytes of their own pattern (blocking writes of odd sizes) while a second
 * thread per connection reads the echo back, and compare. Run under the interposer.
 * A writer keeps at most 64 KiB unechoed, so neither end's window closes (the
 * near-zero-window regime is a TCP engine matter, not this test's).
 *
 *   threads PEER_IP ECHO_PORT THREADS BYTES
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static struct sockaddr_in peer;
static size_t bytes;

struct conn {
    int id, fd, ok;
    size_t got; /* echoed so far (the reader's, read by the writer) */
};

static unsigned char pattern(int id, size_t i) { return (unsigned char)(i * 31 + id * 7 + (i >> 9)); }

static void *reader(void *arg) {
    struct conn *c = arg;
    static __thread unsigned char buf[7000];
    size_t got = 0;
    while (got < bytes) {
        ssize_t r = read(c->fd, buf, sizeof buf);
        if (r <= 0) {
            fprintf(stderr, "conn %d: read %zd at %zu: %s\n", c->id, r, got, strerror(errno));
            c->ok = 0;
            return NULL;
        }
        for (ssize_t k = 0; k < r; k++)
            if (buf[k] != pattern(c->id, got + k)) {
                fprintf(stderr, "conn %d: byte %zu differs\n", c->id, got + k);
                c->ok = 0;
                return NULL;
            }
        got += r;
        __atomic_store_n(&c->got, got, __ATOMIC_RELEASE);
    }
    return NULL;
}

static void *writer(void *arg) {
    struct conn *c = arg;
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&peer, sizeof peer) < 0) {
        fprintf(stderr, "conn %d: connect: %s\n", c->id, strerror(errno));
        c->ok = 0;
        return NULL;
    }
    pthread_t rt;
    c->ok = 1;
    pthread_create(&rt, NULL, reader, c);
    unsigned char buf[5003];
    size_t sent = 0;
    while (sent < bytes) {
        while (c->ok && sent - __atomic_load_n(&c->got, __ATOMIC_ACQUIRE) > 65536)
            usleep(200);
        if (!c->ok)
            break;
        size_t n = bytes - sent < sizeof buf ? bytes - sent : sizeof buf;
        for (size_t k = 0; k < n; k++)
            buf[k] = pattern(c->id, sent + k);
        ssize_t w = write(c->fd, buf, n);
        if (w <= 0) {
            fprintf(stderr, "conn %d: write: %s\n", c->id, strerror(errno));
            break;
        }
        sent += w;
    }
    pthread_join(rt, NULL);
    close(c->fd);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s PEER_IP ECHO_PORT THREADS BYTES\n", argv[0]);
        return 100;
    }
    peer.sin_family = AF_INET;
    inet_pton(AF_INET, argv[1], &peer.sin_addr);
    peer.sin_port = htons(atoi(argv[2]));
    int n = atoi(argv[3]);
    bytes = strtoul(argv[4], NULL, 10);
    pthread_t *t = calloc(n, sizeof *t);
    struct conn *c = calloc(n, sizeof *c);
    for (int i = 0; i < n; i++) {
        c[i].id = i;
        pthread_create(&t[i], NULL, writer, &c[i]);
    }
    int good = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(t[i], NULL);
        good += c[i].ok;
    }
    printf("%d of %d connections echoed %zu bytes exactly\n", good, n, bytes);
    return good == n ? 0 : 1;
}
