/*
 * proxy.c - a TCP delay proxy: the network model of the benchmark.
 *
 * Listens on 127.0.0.1 (an ephemeral port unless --port is given) and
 * forwards every connection to a Unix socket (the throwaway server's), and
 * delays every chunk in each direction by rtt/2 microseconds, so a client
 * sees the chosen round-trip time on top of the server's own latency.
 *
 * One thread, epoll and a timerfd: a chunk read at time t is written at
 * t + rtt/2.  The delay is the same for every chunk, so one FIFO of
 * pending chunks, in arrival order, is also in order of due time; a chunk
 * whose destination cannot take it yet waits in that direction's output
 * buffer (and reading from the source pauses while that buffer is large),
 * which keeps the bytes of each direction in order.  An end of stream is
 * delayed like data.  Thousands of connections are fine.
 *
 * Usage:  proxy --unix PATH --rtt-us N [--port P]
 * Prints the listening port on its first line of standard output, then
 * runs until SIGTERM/SIGINT or until its standard input reaches end of
 * file (so it stops with the process that started it, whatever happens to
 * that process).  Only loopback addresses are ever used.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define CHUNK 65536
#define OUT_HIGH (4u << 20) /* pause reading while this much is queued */

struct pair;

/* One direction of a connection: bytes read from src, written to dst. */
struct dir {
    struct pair *pair;
    int src, dst;
    unsigned char *out;   /* due bytes not yet written to dst */
    size_t out_len, out_cap;
    size_t queued;        /* bytes read but not yet due */
    int eof_read;         /* src reached end of stream */
    int eof_due;          /* ... and that end is now due: shut dst */
    int reading;          /* EPOLLIN wanted on src */
};

struct pair {
    struct dir d[2];      /* 0: client -> server, 1: server -> client */
    int fd[2];            /* 0: client (TCP), 1: server (Unix) */
    unsigned want[2];     /* epoll events registered per fd */
    int dead;
    int pending;          /* chunks in the global queue */
    struct pair *next_dead;
};

struct chunk {
    struct chunk *next;
    struct dir *dir;
    uint64_t due_ns;
    size_t len;           /* 0: end of stream */
    unsigned char data[];
};

static int ep, tfd, lfd;
static struct chunk *q_head, *q_tail;
static struct pair *dead_list;
static uint64_t delay_ns;
static const char *unix_path;
static volatile sig_atomic_t stop;

/* epoll user data: a tagged pointer (low bit = which fd of the pair) */
#define TAG_LISTEN ((uint64_t)1)
#define TAG_TIMER ((uint64_t)2)
#define TAG_STDIN ((uint64_t)3)

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static void set_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

static void arm_timer(void)
{
    struct itimerspec its;
    memset(&its, 0, sizeof its);
    if (q_head) {
        uint64_t due = q_head->due_ns;
        if (due == 0)
            due = 1;
        its.it_value.tv_sec = (time_t)(due / 1000000000u);
        its.it_value.tv_nsec = (long)(due % 1000000000u);
    }
    timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL);
}

static void update_events(struct pair *p)
{
    if (p->dead)
        return;
    for (int s = 0; s < 2; s++) {
        int fd = p->fd[s];
        /* fd s is the source of d[s] and the destination of d[1-s] */
        unsigned ev = 0;
        if (p->d[s].reading && !p->d[s].eof_read)
            ev |= EPOLLIN;
        if (p->d[1 - s].out_len > 0)
            ev |= EPOLLOUT;
        if (ev == p->want[s])
            continue;
        struct epoll_event e;
        e.events = ev;
        e.data.u64 = (uint64_t)(uintptr_t)p | (uint64_t)s;
        epoll_ctl(ep, EPOLL_CTL_MOD, fd, &e);
        p->want[s] = ev;
    }
}

static void kill_pair(struct pair *p)
{
    if (p->dead)
        return;
    p->dead = 1;
    for (int s = 0; s < 2; s++) {
        epoll_ctl(ep, EPOLL_CTL_DEL, p->fd[s], NULL);
        close(p->fd[s]);
        p->fd[s] = -1;
    }
    p->next_dead = dead_list;
    dead_list = p;
}

static void reap_dead(void)
{
    struct pair **pp = &dead_list;
    while (*pp) {
        struct pair *p = *pp;
        if (p->pending == 0) {
            *pp = p->next_dead;
            free(p->d[0].out);
            free(p->d[1].out);
            free(p);
        } else {
            pp = &p->next_dead;
        }
    }
}

/* Both directions finished: the pair is done. */
static void maybe_finish(struct pair *p)
{
    if (!p->dead && p->d[0].eof_due && p->d[1].eof_due &&
        p->d[0].out_len == 0 && p->d[1].out_len == 0)
        kill_pair(p);
}

static void flush_dir(struct dir *d)
{
    struct pair *p = d->pair;
    while (!p->dead && d->out_len > 0) {
        ssize_t n = send(d->dst, d->out, d->out_len, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break;
            kill_pair(p);
            return;
        }
        memmove(d->out, d->out + n, d->out_len - (size_t)n);
        d->out_len -= (size_t)n;
    }
    if (p->dead)
        return;
    if (d->out_len == 0 && d->eof_due)
        shutdown(d->dst, SHUT_WR);
    if (!d->reading && d->out_len + d->queued < OUT_HIGH / 2)
        d->reading = 1;
    maybe_finish(p);
}

static void deliver(struct chunk *c)
{
    struct dir *d = c->dir;
    struct pair *p = d->pair;
    p->pending--;
    if (p->dead)
        return;
    if (c->len == 0) {
        d->eof_due = 1;
    } else {
        d->queued -= c->len;
        if (d->out_len + c->len > d->out_cap) {
            size_t cap = d->out_cap ? d->out_cap : CHUNK;
            while (cap < d->out_len + c->len)
                cap *= 2;
            unsigned char *o = realloc(d->out, cap);
            if (!o) {
                kill_pair(p);
                return;
            }
            d->out = o;
            d->out_cap = cap;
        }
        memcpy(d->out + d->out_len, c->data, c->len);
        d->out_len += c->len;
    }
    flush_dir(d);
    update_events(p);
}

static void enqueue(struct dir *d, const unsigned char *data, size_t len)
{
    struct chunk *c = malloc(sizeof *c + len);
    if (!c) {
        kill_pair(d->pair);
        return;
    }
    c->next = NULL;
    c->dir = d;
    c->due_ns = now_ns() + delay_ns;
    c->len = len;
    if (len)
        memcpy(c->data, data, len);
    d->queued += len;
    d->pair->pending++;
    int was_empty = q_head == NULL;
    if (q_tail)
        q_tail->next = c;
    else
        q_head = c;
    q_tail = c;
    if (was_empty)
        arm_timer();
}

static void read_dir(struct dir *d)
{
    static unsigned char buf[CHUNK];
    struct pair *p = d->pair;
    for (int rounds = 0; rounds < 16 && !p->dead && !d->eof_read; rounds++) {
        ssize_t n = recv(d->src, buf, sizeof buf, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break;
            kill_pair(p); /* reset: drop both sides at once */
            return;
        }
        if (n == 0) {
            d->eof_read = 1;
            enqueue(d, NULL, 0);
            break;
        }
        enqueue(d, buf, (size_t)n);
        if (d->out_len + d->queued >= OUT_HIGH) {
            d->reading = 0;
            break;
        }
    }
    update_events(p);
}

static void accept_all(void)
{
    for (;;) {
        int c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (c < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                perror("proxy: accept");
            return;
        }
        int one = 1;
        setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un sa;
        memset(&sa, 0, sizeof sa);
        sa.sun_family = AF_UNIX;
        snprintf(sa.sun_path, sizeof sa.sun_path, "%s", unix_path);
        /* A blocking connect to a local socket is immediate. */
        if (s < 0 || connect(s, (struct sockaddr *)&sa, sizeof sa) != 0) {
            perror("proxy: connect to server socket");
            if (s >= 0)
                close(s);
            close(c);
            continue;
        }
        set_nonblock(s);
        struct pair *p = calloc(1, sizeof *p);
        if (!p) {
            close(s);
            close(c);
            continue;
        }
        p->fd[0] = c;
        p->fd[1] = s;
        for (int k = 0; k < 2; k++) {
            p->d[k].pair = p;
            p->d[k].src = p->fd[k];
            p->d[k].dst = p->fd[1 - k];
            p->d[k].reading = 1;
        }
        for (int k = 0; k < 2; k++) {
            struct epoll_event e;
            e.events = EPOLLIN;
            e.data.u64 = (uint64_t)(uintptr_t)p | (uint64_t)k;
            epoll_ctl(ep, EPOLL_CTL_ADD, p->fd[k], &e);
            p->want[k] = EPOLLIN;
        }
    }
}

static void fire_due(void)
{
    uint64_t t = now_ns();
    while (q_head && q_head->due_ns <= t) {
        struct chunk *c = q_head;
        q_head = c->next;
        if (!q_head)
            q_tail = NULL;
        deliver(c);
        free(c);
    }
    arm_timer();
}

static void usage(void)
{
    fprintf(stderr, "usage: proxy --unix PATH --rtt-us N [--port P]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    long rtt_us = -1, port = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--unix") && i + 1 < argc)
            unix_path = argv[++i];
        else if (!strcmp(argv[i], "--rtt-us") && i + 1 < argc)
            rtt_us = strtol(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--port") && i + 1 < argc)
            port = strtol(argv[++i], NULL, 10);
        else
            usage();
    }
    if (!unix_path || rtt_us < 0 || rtt_us > 10000000 || port < 0 ||
        port > 65535)
        usage();
    delay_ns = (uint64_t)rtt_us * 1000u / 2u;

    /* Timer precision: the default 50 us slack would be 10% of 0.5 ms. */
    prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
    /* A network does not wait for CPU: run ahead of the server and the
     * clients when the machine is busy (best effort; needs privilege). */
    (void)setpriority(PRIO_PROCESS, 0, -10);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (lfd < 0) {
        perror("proxy: socket");
        return 1;
    }
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in in;
    memset(&in, 0, sizeof in);
    in.sin_family = AF_INET;
    in.sin_addr.s_addr = htonl(INADDR_LOOPBACK); /* loopback only */
    in.sin_port = htons((uint16_t)port);
    if (bind(lfd, (struct sockaddr *)&in, sizeof in) != 0 ||
        listen(lfd, 1024) != 0) {
        perror("proxy: bind/listen on 127.0.0.1");
        return 1;
    }
    socklen_t sl = sizeof in;
    getsockname(lfd, (struct sockaddr *)&in, &sl);

    ep = epoll_create1(EPOLL_CLOEXEC);
    tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (ep < 0 || tfd < 0) {
        perror("proxy: epoll/timerfd");
        return 1;
    }
    struct epoll_event e;
    e.events = EPOLLIN;
    e.data.u64 = TAG_LISTEN;
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &e);
    e.data.u64 = TAG_TIMER;
    epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &e);
    e.events = EPOLLIN | EPOLLHUP;
    e.data.u64 = TAG_STDIN;
    /* Fails harmlessly when stdin cannot be polled (a regular file). */
    (void)epoll_ctl(ep, EPOLL_CTL_ADD, 0, &e);

    printf("%u\n", (unsigned)ntohs(in.sin_port));
    fflush(stdout);

    struct epoll_event evs[256];
    while (!stop) {
        int n = epoll_wait(ep, evs, 256, 1000);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            perror("proxy: epoll_wait");
            break;
        }
        for (int i = 0; i < n; i++) {
            uint64_t u = evs[i].data.u64;
            if (u == TAG_LISTEN) {
                accept_all();
            } else if (u == TAG_TIMER) {
                uint64_t exp;
                ssize_t r = read(tfd, &exp, sizeof exp);
                (void)r;
                fire_due();
            } else if (u == TAG_STDIN) {
                char b[256];
                ssize_t r = read(0, b, sizeof b);
                if (r <= 0 && !(r < 0 && errno == EINTR))
                    stop = 1; /* our parent is gone */
            } else {
                struct pair *p = (struct pair *)(uintptr_t)(u & ~(uint64_t)1);
                int s = (int)(u & 1);
                if (p->dead)
                    continue;
                if (evs[i].events & EPOLLOUT)
                    flush_dir(&p->d[1 - s]);
                if (!p->dead && (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
                    read_dir(&p->d[s]);
                if (!p->dead)
                    update_events(p);
            }
        }
        /* Chunks may have become due while we were busy. */
        if (q_head && q_head->due_ns <= now_ns())
            fire_due();
        reap_dead();
    }
    return 0;
}
