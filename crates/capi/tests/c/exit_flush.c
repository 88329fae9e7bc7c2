/*
 * A clean exit flushes: connect, queue BYTES bytes with one blocking write loop, and
 * return from main at once (no close, no shutdown). The kernel peer must receive every
 * byte and then EOF. Run under the interposer.
 *
 *   exit_flush PEER_IP PORT BYTES
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 4)
        return 100;
    struct sockaddr_in peer = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[2]))};
    inet_pton(AF_INET, argv[1], &peer.sin_addr);
    size_t bytes = strtoul(argv[3], NULL, 10);
    int fd = -1;
    /* The peer may not listen yet: try again for up to 10 s while it refuses. */
    for (int tries = 0; tries < 100; tries++) {
        fd = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(fd, (struct sockaddr *)&peer, sizeof peer) == 0)
            break;
        perror("connect");
        close(fd);
        fd = -1;
        usleep(100000);
    }
    if (fd < 0)
        return 1;
    static char buf[65536];
    size_t sent = 0;
    while (sent < bytes) {
        size_t n = bytes - sent < sizeof buf ? bytes - sent : sizeof buf;
        for (size_t k = 0; k < n; k++)
            buf[k] = (char)((sent + k) * 13 + 1);
        ssize_t w = write(fd, buf, n);
        if (w <= 0) {
            perror("write");
            return 1;
        }
        sent += w;
    }
    return 0;
}
