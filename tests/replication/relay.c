/*
 * relay.c - failover_load relay: the replica's link to the primary.
 *
 * Owns a TCP relay between the replica's IO thread and the primary.  The
 * test stops it (SIGSTOP) to make the replica fall behind in receiving
 * while its IO thread still runs (with GTID, MariaDB deletes the relay
 * log when both replication threads are stopped and one is started
 * again, so stopping the IO thread instead would change what is
 * measured).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "failover.h"

#define RELAY_PAIRS 8

static int tcp_socket_to(const char *host, unsigned port, int listen_too)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &a.sin_addr) != 1) {
        close(fd);
        return -1;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    int rc = listen_too
                 ? (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
                            listen(fd, 8) == 0
                        ? 0
                        : -1)
                 : connect(fd, (struct sockaddr *)&a, sizeof a);
    if (rc != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Copy what is readable on from to to; 0 on success, -1 when the pair is
 * to be closed.  Writes block: one replica, one stream. */
static int relay_copy(int from, int to)
{
    char buf[65536];
    ssize_t n = read(from, buf, sizeof buf);
    if (n <= 0)
        return -1;
    for (ssize_t off = 0; off < n;) {
        ssize_t w = write(to, buf + off, (size_t)(n - off));
        if (w <= 0)
            return -1;
        off += w;
    }
    return 0;
}

_Noreturn void relay_main(unsigned listen_port)
{
    signal(SIGPIPE, SIG_IGN);
    int lfd = tcp_socket_to("127.0.0.1", listen_port, 1);
    if (lfd < 0)
        die("relay: cannot listen on 127.0.0.1:%u: %s", listen_port,
            strerror(errno));
    printf("relay: listening on 127.0.0.1:%u\n", listen_port);
    fflush(stdout);
    int pair[RELAY_PAIRS][2];
    int n = 0;
    for (;;) {
        struct pollfd pf[1 + 2 * RELAY_PAIRS];
        pf[0].fd = lfd;
        pf[0].events = POLLIN;
        for (int i = 0; i < n; i++) {
            pf[1 + 2 * i].fd = pair[i][0];
            pf[2 + 2 * i].fd = pair[i][1];
            pf[1 + 2 * i].events = pf[2 + 2 * i].events = POLLIN;
        }
        if (poll(pf, (nfds_t)(1 + 2 * n), -1) < 0) {
            if (errno == EINTR)
                continue;
            die("relay: poll: %s", strerror(errno));
        }
        for (int i = n - 1; i >= 0; i--) {
            int bad = 0;
            for (int side = 0; side < 2 && !bad; side++) {
                short ev = pf[1 + 2 * i + side].revents;
                if (ev & (POLLIN | POLLHUP | POLLERR))
                    bad = relay_copy(pair[i][side], pair[i][1 - side]) != 0;
            }
            if (bad) {
                close(pair[i][0]);
                close(pair[i][1]);
                pair[i][0] = pair[n - 1][0];
                pair[i][1] = pair[n - 1][1];
                n--;
            }
        }
        if (pf[0].revents & POLLIN) {
            int cfd = accept(lfd, NULL, NULL);
            if (cfd < 0)
                continue;
            int sfd = n < RELAY_PAIRS
                          ? tcp_socket_to(C.ep_host[0], C.ep_port[0], 0)
                          : -1;
            if (sfd < 0) {
                close(cfd); /* the primary is gone: so is the link */
                continue;
            }
            pair[n][0] = cfd;
            pair[n][1] = sfd;
            n++;
        }
    }
}
