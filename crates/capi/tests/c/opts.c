/*
 * Socket options and calls ulnet applies like Linux (issue 16), checked with plain libc
 * calls under the interposer (LD_PRELOAD=libulnet_preload.so, as `ulnet run` does). The
 * kernel peers are tests/c/opts_peer.py in namespace B; what goes over the wire (window,
 * window scale, TOS, TTL) is checked by the test from a capture there.
 *
 *   opts rcvbuf-connect PEER_IP PORT BYTES   SO_RCVBUF 4096 before connect; read BYTES
 *   opts rcvbuf-listen PORT BYTES            SO_RCVBUF 4096 on a listener; accept, read
 *   opts tos-tcp PEER_IP PORT BYTES          IP_TOS 0xb9 (EF, ECT(1)), IP_TTL 33; connect, read
 *   opts tos-udp PEER_IP PORT                IP_TOS 0xb9, IP_TTL 33; 3 datagrams, 3 answers
 *   opts hup PEER_IP PORT                    POLLHUP/EPOLLHUP when both directions are shut
 *                                            (peer: opts_peer.py close, 2 connections)
 *   opts udp-drop PORT PEER_IP PEER_PORT     two UDP sockets share PORT, connected to
 *                                            PEER_PORT and PEER_PORT+1; prints "ready",
 *                                            waits for "go" from PEER_PORT (what others
 *                                            send meanwhile nobody takes: dropped, counted)
 *   opts bind-connect PEER_IP PORT LPORT     bind before connect (port 0, then LPORT); the
 *                                            peer (opts_peer.py names) says which port it saw
 *
 * Prints "ok NAME" or "FAIL NAME: why" per check and "done, N failures"; exits with N.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

static int failures;

#define CHECK(name, cond, ...)                                                   \
    do {                                                                         \
        if (cond) {                                                              \
            printf("ok %s\n", name);                                             \
        } else {                                                                 \
            printf("FAIL %s: ", name);                                           \
            printf(__VA_ARGS__);                                                 \
            printf(" (errno %d %s)\n", errno, strerror(errno));                  \
            failures++;                                                          \
        }                                                                        \
        fflush(stdout);                                                          \
    } while (0)

static struct sockaddr_in addr_of(const char *ip, int port) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    if (inet_pton(AF_INET, ip, &a.sin_addr) != 1) {
        fprintf(stderr, "bad address %s\n", ip);
        exit(100);
    }
    return a;
}

static int getint(int fd, int level, int opt) {
    int v = -1;
    socklen_t len = sizeof v;
    if (getsockopt(fd, level, opt, &v, &len) < 0)
        return -1;
    return v;
}

/* Reads until EOF; true when exactly `want` bytes of the pattern (i*7+3)&255 came. */
static int read_pattern(int fd, long want, long *got) {
    static char buf[65536];
    long n = 0;
    int same = 1;
    for (;;) {
        ssize_t r = read(fd, buf, sizeof buf);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        for (ssize_t i = 0; i < r; i++)
            if ((unsigned char)buf[i] != (unsigned char)((n + i) * 7 + 3))
                same = 0;
        n += r;
    }
    *got = n;
    return same && n == want;
}

/* The SO_RCVBUF a program setting 4096 reads back: doubled (rmem_max is far above). */
#define SMALL_RCVBUF 4096

static void rcvbuf_connect(const char *ip, int port, long bytes) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int v = SMALL_RCVBUF;
    int r = setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof v);
    CHECK("rcvbuf-set", r == 0 && getint(fd, SOL_SOCKET, SO_RCVBUF) == 2 * SMALL_RCVBUF,
          "set %d, reads %d", r, getint(fd, SOL_SOCKET, SO_RCVBUF));
    struct sockaddr_in a = addr_of(ip, port);
    r = connect(fd, (struct sockaddr *)&a, sizeof a);
    CHECK("rcvbuf-connect", r == 0, "connect %d", r);
    long got = 0;
    int same = read_pattern(fd, bytes, &got);
    CHECK("rcvbuf-connect-bytes-exact", same, "%ld of %ld bytes, same %d", got, bytes, same);
    CHECK("rcvbuf-connect-still-reads-back", getint(fd, SOL_SOCKET, SO_RCVBUF) == 2 * SMALL_RCVBUF,
          "reads %d", getint(fd, SOL_SOCKET, SO_RCVBUF));
    close(fd);
}

static void rcvbuf_listen(int port, long bytes) {
    int l = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1, v = SMALL_RCVBUF;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    int r = setsockopt(l, SOL_SOCKET, SO_RCVBUF, &v, sizeof v);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    if (r < 0 || bind(l, (struct sockaddr *)&a, sizeof a) < 0 || listen(l, 4) < 0) {
        perror("listen");
        exit(100);
    }
    printf("listening\n");
    fflush(stdout);
    int c = accept(l, NULL, NULL);
    CHECK("rcvbuf-accept", c >= 0, "accept %d", c);
    CHECK("rcvbuf-inherited", getint(c, SOL_SOCKET, SO_RCVBUF) == 2 * SMALL_RCVBUF,
          "the accepted socket reads %d", getint(c, SOL_SOCKET, SO_RCVBUF));
    long got = 0;
    int same = read_pattern(c, bytes, &got);
    CHECK("rcvbuf-listen-bytes-exact", same, "%ld of %ld bytes, same %d", got, bytes, same);
    close(c);
    close(l);
}

static void tos_tcp(const char *ip, int port, long bytes) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int tos = 0xb9, ttl = 33;
    int r = setsockopt(fd, IPPROTO_IP, IP_TOS, &tos, sizeof tos);
    /* Linux keeps a TCP socket's ECN bits: the DSCP part is set and read back. */
    CHECK("tos-tcp-set", r == 0 && getint(fd, IPPROTO_IP, IP_TOS) == 0xb8, "set %d, reads %#x", r,
          getint(fd, IPPROTO_IP, IP_TOS));
    r = setsockopt(fd, IPPROTO_IP, IP_TTL, &ttl, sizeof ttl);
    CHECK("ttl-tcp-set", r == 0 && getint(fd, IPPROTO_IP, IP_TTL) == 33, "set %d, reads %d", r,
          getint(fd, IPPROTO_IP, IP_TTL));
    struct sockaddr_in a = addr_of(ip, port);
    r = connect(fd, (struct sockaddr *)&a, sizeof a);
    CHECK("tos-tcp-connect", r == 0, "connect %d", r);
    long got = 0;
    int same = read_pattern(fd, bytes, &got);
    CHECK("tos-tcp-bytes-exact", same, "%ld of %ld bytes", got, bytes);
    close(fd);
}

static void tos_udp(const char *ip, int port) {
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    int tos = 0xb9, ttl = 33;
    int r = setsockopt(fd, IPPROTO_IP, IP_TOS, &tos, sizeof tos);
    CHECK("tos-udp-set", r == 0 && getint(fd, IPPROTO_IP, IP_TOS) == 0xb9, "set %d, reads %#x", r,
          getint(fd, IPPROTO_IP, IP_TOS));
    r = setsockopt(fd, IPPROTO_IP, IP_TTL, &ttl, sizeof ttl);
    CHECK("ttl-udp-set", r == 0 && getint(fd, IPPROTO_IP, IP_TTL) == 33, "set %d", r);
    struct timeval tv = {.tv_sec = 1};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct sockaddr_in a = addr_of(ip, port);
    int answers = 0;
    /* The peer may not be bound yet: retry until three answers came (bounded). */
    for (int i = 0; i < 40 && answers < 3; i++) {
        sendto(fd, "x", 1, 0, (struct sockaddr *)&a, sizeof a);
        char buf[16];
        if (recv(fd, buf, sizeof buf, 0) == 2 && !memcmp(buf, "ok", 2))
            answers++;
    }
    CHECK("tos-udp-answers", answers == 3, "%d answers", answers);
    close(fd);
}

static int local_port(int fd) {
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    if (getsockname(fd, (struct sockaddr *)&a, &len) < 0)
        return -1;
    return ntohs(a.sin_port);
}

/* Connects fd to the names peer; returns the port it saw us come from. */
static int seen_port(int fd, const struct sockaddr_in *to) {
    if (connect(fd, (const struct sockaddr *)to, sizeof *to) < 0)
        return -1;
    char line[64] = {0};
    size_t n = 0;
    ssize_t r;
    while (n < sizeof line - 1 && (r = read(fd, line + n, sizeof line - 1 - n)) > 0)
        n += r;
    char ip[32];
    int port = -1;
    if (sscanf(line, "%31s %d", ip, &port) != 2)
        return -1;
    return port;
}

static void bind_connect(const char *ip, int port, int lport) {
    struct sockaddr_in to = addr_of(ip, port);
    struct sockaddr_in any = {.sin_family = AF_INET};

    int a = socket(AF_INET, SOCK_STREAM, 0);
    int r = bind(a, (struct sockaddr *)&any, sizeof any);
    int p = local_port(a);
    CHECK("bind-port-0-picks", r == 0 && p >= 32768 && p <= 60999, "bind %d, getsockname port %d", r, p);
    int b = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in same = {.sin_family = AF_INET, .sin_port = htons(p)};
    r = bind(b, (struct sockaddr *)&same, sizeof same);
    CHECK("bind-taken-eaddrinuse", r < 0 && errno == EADDRINUSE, "bind gave %d", r);
    close(b);
    int seen = seen_port(a, &to);
    CHECK("bind-0-connect-uses-it", seen == p && local_port(a) == p, "bound %d, peer saw %d, getsockname %d",
          p, seen, local_port(a));
    close(a);

    a = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in mine = {.sin_family = AF_INET, .sin_port = htons(lport)};
    r = bind(a, (struct sockaddr *)&mine, sizeof mine);
    CHECK("bind-port", r == 0 && local_port(a) == lport, "bind %d, port %d", r, local_port(a));
    seen = seen_port(a, &to);
    CHECK("bind-port-connect-uses-it", seen == lport, "peer saw %d", seen);
    close(a);

    /* A port a listener holds cannot be bound, even with SO_REUSEADDR on both. */
    int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in lp = {.sin_family = AF_INET, .sin_port = htons(lport + 1)};
    r = bind(l, (struct sockaddr *)&lp, sizeof lp);
    int r2 = listen(l, 4);
    b = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(b, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    int r3 = bind(b, (struct sockaddr *)&lp, sizeof lp);
    CHECK("bind-listener-port-eaddrinuse", r == 0 && r2 == 0 && r3 < 0 && errno == EADDRINUSE,
          "bind %d listen %d, second bind %d", r, r2, r3);
    close(b);
    close(l);
}

static short polled(int fd, int ms) {
    struct pollfd p = {.fd = fd, .events = POLLIN | POLLOUT | POLLRDHUP};
    if (poll(&p, 1, ms) < 0)
        return -1;
    return p.revents;
}

/* The events a level-triggered epoll set holding only fd reports now. */
static unsigned epolled(int ep) {
    struct epoll_event e;
    int n = epoll_wait(ep, &e, 1, 0);
    return n == 1 ? e.events : 0;
}

/* Polls until `want` shows (bounded: 10 s), then returns what poll says. (POLLOUT is
 * ready all along, so poll returns at once: the wait is the sleep.) */
static short wait_for(int fd, short want) {
    short r = 0;
    for (int i = 0; i < 500; i++) {
        r = polled(fd, 0);
        if ((r & want) == want)
            break;
        usleep(20000);
    }
    return r;
}

static void hup(const char *ip, int port) {
    struct sockaddr_in to = addr_of(ip, port);
    /* The peer closes at once: its FIN alone is end of input, not a hang-up. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fd, (struct sockaddr *)&to, sizeof to) < 0) {
        perror("connect");
        exit(100);
    }
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP, .data.fd = fd};
    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
    short r = wait_for(fd, POLLRDHUP);
    unsigned e = epolled(ep);
    CHECK("peer-fin-rdhup-not-hup",
          (r & (POLLIN | POLLRDHUP | POLLOUT)) == (POLLIN | POLLRDHUP | POLLOUT) && !(r & POLLHUP) &&
              (e & EPOLLRDHUP) && !(e & EPOLLHUP),
          "poll %#x epoll %#x", r, e);
    /* Our side shut too: both directions are, POLLHUP (Linux tcp_poll: SHUTDOWN_MASK). */
    shutdown(fd, SHUT_WR);
    r = wait_for(fd, POLLHUP);
    e = epolled(ep);
    CHECK("both-shut-hup", (r & (POLLHUP | POLLIN | POLLRDHUP)) == (POLLHUP | POLLIN | POLLRDHUP) &&
                               (e & (EPOLLHUP | EPOLLIN | EPOLLRDHUP)) == (EPOLLHUP | EPOLLIN | EPOLLRDHUP),
          "poll %#x epoll %#x", r, e);
    char c;
    CHECK("both-shut-eof", read(fd, &c, 1) == 0, "read did not give EOF");
    close(ep);
    close(fd);

    /* shutdown(SHUT_RDWR) hangs up at once, whatever the peer did. */
    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fd, (struct sockaddr *)&to, sizeof to) < 0) {
        perror("connect");
        exit(100);
    }
    ep = epoll_create1(0);
    ev.data.fd = fd;
    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
    shutdown(fd, SHUT_RDWR);
    r = polled(fd, 0);
    e = epolled(ep);
    CHECK("shut-rdwr-hup", (r & POLLHUP) && (e & EPOLLHUP), "poll %#x epoll %#x", r, e);
    close(ep);
    close(fd);
}

static void udp_drop(int port, const char *ip, int peer_port) {
    int s[2], one = 1;
    for (int i = 0; i < 2; i++) {
        s[i] = socket(AF_INET, SOCK_DGRAM, 0);
        setsockopt(s[i], SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
        struct sockaddr_in to = addr_of(ip, peer_port + i);
        if (bind(s[i], (struct sockaddr *)&a, sizeof a) < 0 ||
            connect(s[i], (struct sockaddr *)&to, sizeof to) < 0) {
            perror("udp socket");
            exit(100);
        }
    }
    printf("ready\n");
    fflush(stdout);
    struct pollfd p = {.fd = s[0], .events = POLLIN};
    char buf[16] = {0};
    int r = poll(&p, 1, 20000);
    ssize_t n = r == 1 ? recv(s[0], buf, sizeof buf - 1, 0) : -1;
    CHECK("udp-drop-go", n == 2 && !memcmp(buf, "go", 2), "poll %d recv %zd", r, n);
    close(s[0]);
    close(s[1]);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: see the comment at the top of opts.c\n");
        return 100;
    }
    const char *mode = argv[1];
    if (!strcmp(mode, "rcvbuf-connect") && argc == 5)
        rcvbuf_connect(argv[2], atoi(argv[3]), atol(argv[4]));
    else if (!strcmp(mode, "rcvbuf-listen") && argc == 4)
        rcvbuf_listen(atoi(argv[2]), atol(argv[3]));
    else if (!strcmp(mode, "tos-tcp") && argc == 5)
        tos_tcp(argv[2], atoi(argv[3]), atol(argv[4]));
    else if (!strcmp(mode, "bind-connect") && argc == 5)
        bind_connect(argv[2], atoi(argv[3]), atoi(argv[4]));
    else if (!strcmp(mode, "hup") && argc == 4)
        hup(argv[2], atoi(argv[3]));
    else if (!strcmp(mode, "udp-drop") && argc == 5)
        udp_drop(atoi(argv[2]), argv[3], atoi(argv[4]));
    else if (!strcmp(mode, "tos-udp") && argc == 4)
        tos_udp(argv[2], atoi(argv[3]));
    else {
        fprintf(stderr, "unknown mode or arguments: %s\n", mode);
        return 100;
    }
    printf("done, %d failures\n", failures);
    return failures;
}
