/*
 * An echo server on libulnet: the ulnet sockets and a kernel descriptor (a signalfd
 * for SIGINT/SIGTERM) in one kernel epoll set, level-triggered, non-blocking.
 *
 *   ULNET_IFACE=veth0 ULNET_ADDR=198.18.0.5/24 ./echo_server PORT [CONNECTIONS]
 *
 * Serves until CONNECTIONS connections have come and gone (0: until a signal), then
 * closes everything and exits 0. Prints "listening on PORT" once ready.
 * Build: cc -Icrates/capi/include echo_server.c -Ltarget/debug -lulnet
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "ulnet.h"

#define MAX_EVENTS 64

static void die(const char *what) {
    fprintf(stderr, "echo_server: %s: %s\n", what, strerror(errno));
    exit(1);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s PORT [CONNECTIONS]\n", argv[0]);
        return 2;
    }
    int port = atoi(argv[1]);
    long want = argc > 2 ? atol(argv[2]) : 0;
    if (ulnet_init(NULL) < 0)
        die("ulnet_init");

    int lfd = ulnet_socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (lfd < 0)
        die("socket");
    int one = 1;
    if (ulnet_setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0)
        die("setsockopt");
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(port)};
    if (ulnet_bind(lfd, (struct sockaddr *)&sin, sizeof sin) < 0)
        die("bind");
    if (ulnet_listen(lfd, 128) < 0)
        die("listen");

    /* A kernel descriptor in the same set: signals end the server. */
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sfd < 0)
        die("signalfd");

    int ep = ulnet_epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0)
        die("epoll_create1");
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = lfd};
    if (ulnet_epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev) < 0)
        die("epoll_ctl listener");
    ev.data.fd = sfd;
    if (ulnet_epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &ev) < 0)
        die("epoll_ctl signalfd");
    printf("listening on %d\n", port);
    fflush(stdout);

    long done = 0, open = 0;
    unsigned long long bytes = 0;
    static char buf[65536];
    struct epoll_event evs[MAX_EVENTS];
    for (;;) {
        int n = ulnet_epoll_wait(ep, evs, MAX_EVENTS, -1);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            die("epoll_wait");
        }
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;
            if (fd == sfd) {
                fprintf(stderr, "echo_server: signal, exiting\n");
                goto out;
            }
            if (fd == lfd) {
                for (;;) {
                    struct sockaddr_in peer;
                    socklen_t plen = sizeof peer;
                    int c = ulnet_accept4(lfd, (struct sockaddr *)&peer, &plen, SOCK_NONBLOCK);
                    if (c < 0) {
                        if (errno == EAGAIN)
                            break;
                        die("accept4");
                    }
                    ulnet_setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    struct epoll_event cev = {.events = EPOLLIN | EPOLLRDHUP, .data.fd = c};
                    if (ulnet_epoll_ctl(ep, EPOLL_CTL_ADD, c, &cev) < 0)
                        die("epoll_ctl connection");
                    open++;
                }
                continue;
            }
            /* A connection: echo what is there; at EOF or error, close it. */
            int closeit = 0;
            for (;;) {
                ssize_t r = ulnet_read(fd, buf, sizeof buf);
                if (r == 0) {
                    closeit = 1;
                    break;
                }
                if (r < 0) {
                    if (errno != EAGAIN)
                        closeit = 1;
                    break;
                }
                bytes += r;
                /* Blocking echo of this chunk: poll for room when the buffer is full. */
                ssize_t off = 0;
                while (off < r) {
                    ssize_t w = ulnet_send(fd, buf + off, r - off, MSG_NOSIGNAL);
                    if (w < 0) {
                        if (errno == EAGAIN) {
                            struct pollfd p = {.fd = fd, .events = POLLOUT};
                            ulnet_poll(&p, 1, 1000);
                            continue;
                        }
                        closeit = 1;
                        break;
                    }
                    off += w;
                }
                if (closeit)
                    break;
            }
            if (closeit) {
                ulnet_epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
                ulnet_close(fd);
                open--;
                done++;
                if (want > 0 && done >= want && open == 0)
                    goto out;
            }
        }
    }
out:
    fprintf(stderr, "echo_server: %ld connections, %llu bytes echoed\n", done, bytes);
    ulnet_close(lfd);
    close(sfd);
    close(ep);
    ulnet_fini();
    return 0;
}
