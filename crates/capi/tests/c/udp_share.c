/* Several UDP sockets on one port (SO_REUSEADDR), as `iperf3 -s` uses them for a UDP
 * test: the first socket takes a client's first datagram and connects to it, a second
 * one is bound to the same port for the next client. Linux delivers each datagram to
 * the socket connected to its sender, else to an unconnected one; poll shows each
 * socket readable exactly when a datagram for it waits.
 *
 * Usage: udp_share PORT. The peer (kernel, tests/c_semantics.rs) sends "hello1" from
 * its socket A until it gets "ack1", then "data-A" from A and "hello2" from B, waits
 * for "ack2" on B, sends "late-A" from A and waits for "ack3" on B.
 * Prints "done, N failures". */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int failures;

#define CHECK(c, ...)                                                                    \
    do {                                                                                 \
        if (!(c)) {                                                                      \
            failures++;                                                                  \
            printf("FAIL line %d: ", __LINE__);                                          \
            printf(__VA_ARGS__);                                                         \
            printf(" (errno %d %s)\n", errno, strerror(errno));                          \
        }                                                                                \
    } while (0)

static int udp_on(int port, int reuse) {
    int s = socket(AF_INET6, SOCK_DGRAM, 0);
    int on = 1, off = 0;
    if (reuse)
        setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
    struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_port = htons(port)};
    if (bind(s, (struct sockaddr *)&a, sizeof a) < 0) {
        int e = errno;
        close(s);
        errno = e;
        return -1;
    }
    return s;
}

/* Waits up to `ms` for `fd` to be readable. */
static int readable(int fd, int ms) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, ms) == 1 && (p.revents & POLLIN);
}

/* Receives one datagram on `fd` (waiting up to 5 s), skipping repeats of `skip`. */
static int take(int fd, char *buf, size_t len, struct sockaddr_in6 *from, const char *skip) {
    for (;;) {
        if (!readable(fd, 5000))
            return -1;
        socklen_t fl = sizeof *from;
        ssize_t n = recvfrom(fd, buf, len - 1, MSG_DONTWAIT, (struct sockaddr *)from, &fl);
        if (n < 0)
            return -1;
        buf[n] = 0;
        if (!skip || strcmp(buf, skip) != 0)
            return (int)n;
    }
}

int main(int argc, char **argv) {
    if (argc < 2)
        return 2;
    int port = atoi(argv[1]);
    char buf[256];
    struct sockaddr_in6 a, b, f;

    int s1 = udp_on(port, 1);
    CHECK(s1 >= 0, "bind the first socket");
    printf("ready\n");
    fflush(stdout);
    CHECK(take(s1, buf, sizeof buf, &a, NULL) > 0 && !strcmp(buf, "hello1"), "hello1: %s", buf);
    CHECK(connect(s1, (struct sockaddr *)&a, sizeof a) == 0, "connect the first socket");

    /* The port again: with SO_REUSEADDR on both, yes; without, EADDRINUSE. */
    int s3 = udp_on(port, 0);
    CHECK(s3 < 0 && errno == EADDRINUSE, "a socket without SO_REUSEADDR is refused");
    int s2 = udp_on(port, 1);
    CHECK(s2 >= 0, "bind the second socket to the same port");
    CHECK(!readable(s2, 0), "the second socket starts not readable");
    CHECK(send(s1, "ack1", 4, 0) == 4, "ack1");

    /* "data-A" from A goes to s1 (connected to A), "hello2" from B to s2. */
    CHECK(take(s2, buf, sizeof buf, &b, NULL) > 0 && !strcmp(buf, "hello2"), "s2 got %s", buf);
    CHECK(take(s1, buf, sizeof buf, &f, "hello1") > 0 && !strcmp(buf, "data-A"), "s1 got %s",
          buf);
    CHECK(f.sin6_port == a.sin6_port, "s1's datagram came from A");
    CHECK(!readable(s1, 50) && !readable(s2, 0), "nothing else waits");
    socklen_t bl = sizeof b;
    CHECK(getsockname(s2, (struct sockaddr *)&f, &bl) == 0 && ntohs(f.sin6_port) == port,
          "s2's port");
    CHECK(getpeername(s2, (struct sockaddr *)&f, &bl) < 0 && errno == ENOTCONN,
          "s2 is not connected");
    CHECK(sendto(s2, "ack2", 4, 0, (struct sockaddr *)&b, sizeof b) == 4, "ack2");

    /* With s1 closed, A's datagrams go to the unconnected s2. */
    close(s1);
    CHECK(take(s2, buf, sizeof buf, &f, "hello1") > 0 && !strcmp(buf, "late-A"), "late: %s",
          buf);
    CHECK(f.sin6_port == a.sin6_port, "the late datagram came from A");
    CHECK(sendto(s2, "ack3", 4, 0, (struct sockaddr *)&b, sizeof b) == 4, "ack3");
    close(s2);
    printf("done, %d failures\n", failures);
    return failures != 0;
}
