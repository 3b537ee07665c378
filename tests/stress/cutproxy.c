/*
 * cutproxy.c - a TCP proxy that cuts connections during COMMIT (and
 * during the reserve procedure's CALL, which commits inside).
 *
 * Listens on 127.0.0.1 (ephemeral port) and forwards every connection to a
 * Unix socket (the throwaway server's), byte for byte, one thread per
 * connection.  It follows the client -> server stream as MySQL packets
 * (3-byte length, 1-byte sequence number); a packet with sequence number 0
 * whose payload is COM_QUERY (0x03) with text starting, after blanks and
 * comments, with COMMIT is a COMMIT.  The reserve procedure's CALL is a
 * commit point too: it is a prepared statement, so the proxy notes the
 * COM_STMT_PREPARE (0x16) of a text calling rsv_fast_reserve, reads the
 * statement id from the server's PREPARE_OK (the next server packet on
 * that connection: the client waits for it), and treats every
 * COM_STMT_EXECUTE (0x17) of that id as a COMMIT.
 *
 * Each "c" line on standard input arms one cut: the next COMMIT seen on any
 * connection is cut, alternately
 *   - after forwarding it (the server commits, the client never hears), or
 *   - before forwarding it (the server rolls back when the session dies),
 * by closing both sides at once.  Either way the client sees the
 * connection drop while it waits for COMMIT's reply: the outcome is
 * unknown to it (RSV_EINDOUBT), which is the point.
 *
 * "c N" lets N-1 COMMITs through first and cuts the N-th (reproducers).
 * A "k" line arms a cut for the next reserve CALL only (the library takes
 * that path for some carts only; the stress arms both kinds).
 * An "s" line prints "cuts <done> <after> <before> <armed> <at CALL>" on
 * standard output.  End of file on standard input stops the proxy.
 *
 * Usage:  cutproxy --unix PATH   (prints the listening port first)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static const char *unix_path;
static atomic_int armed;
static atomic_int armed_call; /* cuts armed for the reserve CALL only */
static atomic_int skip; /* COMMITs to let through before the armed cut */
static atomic_long cuts_after, cuts_before, cuts_call;
static pthread_mutex_t out_mu = PTHREAD_MUTEX_INITIALIZER;

#define MAX_CALL_IDS 64

/* Parser of one direction's packet stream. */
struct pstate {
    unsigned char hdr[4];
    int hdr_got;
    size_t left;             /* payload bytes still to come */
    int candidate;           /* seq 0: a command packet */
    unsigned char head[256]; /* first payload bytes */
    size_t head_got;
};

/* Per connection: prepared CALLs of the reserve procedure. */
struct calls {
    int pending;             /* a CALL prepare awaits its PREPARE_OK */
    uint32_t id[MAX_CALL_IDS];
    int n;
};

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

/* Consume bytes of buf from *i until a packet with a payload ends (1: its
 * first bytes are in ps->head, ps->candidate says whether it is a command)
 * or buf runs out (0).  *pkt_start: offset in buf of the last packet
 * header begun in this buf. */
static int next_packet(struct pstate *ps, const unsigned char *buf, size_t n,
                       size_t *i, size_t *pkt_start)
{
    while (*i < n) {
        if (ps->hdr_got < 4) {
            if (ps->hdr_got == 0)
                *pkt_start = *i;
            ps->hdr[ps->hdr_got++] = buf[(*i)++];
            if (ps->hdr_got == 4) {
                ps->left = (size_t)ps->hdr[0] | (size_t)ps->hdr[1] << 8 |
                           (size_t)ps->hdr[2] << 16;
                ps->candidate = ps->hdr[3] == 0;
                ps->head_got = 0;
                if (ps->left == 0)
                    ps->hdr_got = 0;
            }
            continue;
        }
        size_t take = n - *i < ps->left ? n - *i : ps->left;
        for (size_t k = 0; k < take && ps->head_got < sizeof ps->head; k++)
            ps->head[ps->head_got++] = buf[*i + k];
        *i += take;
        ps->left -= take;
        if (ps->left == 0) {
            ps->hdr_got = 0;
            return 1;
        }
    }
    return 0;
}

static int is_call_prepare(const unsigned char *p, size_t n)
{
    static const char needle[] = "CALL rsv_fast_reserve";
    size_t k = sizeof needle - 1;
    if (n < 1 || p[0] != 0x16)
        return 0;
    for (size_t i = 1; i + k <= n; i++)
        if (strncasecmp((const char *)p + i, needle, k) == 0)
            return 1;
    return 0;
}

static int is_call_execute(const struct calls *cs, const unsigned char *p,
                           size_t n)
{
    if (n < 5 || p[0] != 0x17)
        return 0;
    uint32_t id = le32(p + 1);
    for (int i = 0; i < cs->n; i++)
        if (cs->id[i] == id)
            return 1;
    return 0;
}

/* Server -> client bytes: the first packet after a CALL prepare is its
 * PREPARE_OK (0x00, statement id) or an error. */
static void feed_server(struct pstate *ps, struct calls *cs,
                        const unsigned char *buf, size_t n)
{
    size_t i = 0, pkt_start = 0;
    while (next_packet(ps, buf, n, &i, &pkt_start)) {
        if (!cs->pending)
            continue;
        cs->pending = 0;
        if (ps->head_got >= 5 && ps->head[0] == 0x00 && cs->n < MAX_CALL_IDS)
            cs->id[cs->n++] = le32(ps->head + 1);
    }
}

static int is_commit(const unsigned char *p, size_t n)
{
    if (n < 1 || p[0] != 0x03)
        return 0;
    size_t i = 1;
    for (;;) {
        while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' ||
                         p[i] == '\r'))
            i++;
        if (i + 1 < n && p[i] == '/' && p[i + 1] == '*') {
            i += 2;
            while (i + 1 < n && !(p[i] == '*' && p[i + 1] == '/'))
                i++;
            if (i + 1 >= n)
                return 0;
            i += 2;
            continue;
        }
        break;
    }
    if (n - i < 6 || strncasecmp((const char *)p + i, "COMMIT", 6) != 0)
        return 0;
    return n - i == 6 || !((p[i + 6] >= 'A' && p[i + 6] <= 'Z') ||
                           (p[i + 6] >= 'a' && p[i + 6] <= 'z') ||
                           p[i + 6] == '_');
}

/* Feed bytes; returns the offset just past the end of a COMMIT packet
 * found in buf (and *start its first byte, or 0 if it began in an earlier
 * chunk), or 0 if none ended in buf. */
static size_t feed(struct pstate *ps, struct calls *cs,
                   const unsigned char *buf, size_t n, size_t *start,
                   int *is_call)
{
    size_t i = 0, pkt_start = 0;
    while (next_packet(ps, buf, n, &i, &pkt_start)) {
        if (!ps->candidate)
            continue;
        if (is_call_prepare(ps->head, ps->head_got))
            cs->pending = 1;
        *is_call = is_call_execute(cs, ps->head, ps->head_got);
        if (*is_call || is_commit(ps->head, ps->head_got)) {
            *start = pkt_start;
            return i;
        }
    }
    return 0;
}

static int write_all(int fd, const unsigned char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

struct conn {
    int c, s;
};

static void *relay(void *arg)
{
    struct conn *cn = arg;
    int c = cn->c, s = cn->s;
    free(cn);
    struct pstate ps, sps;
    struct calls cs;
    memset(&ps, 0, sizeof ps);
    memset(&sps, 0, sizeof sps);
    memset(&cs, 0, sizeof cs);
    static _Thread_local unsigned char buf[65536];
    struct pollfd pf[2] = {{c, POLLIN, 0}, {s, POLLIN, 0}};
    for (;;) {
        if (poll(pf, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (pf[1].revents) {
            ssize_t n = recv(s, buf, sizeof buf, 0);
            if (n > 0)
                feed_server(&sps, &cs, buf, (size_t)n);
            if (n <= 0 || write_all(c, buf, (size_t)n) != 0)
                break;
        }
        if (pf[0].revents) {
            ssize_t n = recv(c, buf, sizeof buf, 0);
            if (n <= 0)
                break;
            size_t start = 0, end = 0, off = 0;
            int cut = 0, call = 0;
            /* find COMMITs in this chunk; cut at the first one armed */
            while (off < (size_t)n) {
                size_t st = 0;
                size_t e = feed(&ps, &cs, buf + off, (size_t)n - off, &st,
                                &call);
                if (e == 0)
                    break;
                if (call) {
                    int k = atomic_load(&armed_call);
                    while (k > 0 && !atomic_compare_exchange_weak(
                                        &armed_call, &k, k - 1))
                        ;
                    if (k > 0) {
                        start = off + st;
                        end = off + e;
                        cut = 1;
                        break;
                    }
                }
                int a = atomic_load(&armed);
                if (a > 0) {
                    int k = atomic_load(&skip);
                    while (k > 0 && !atomic_compare_exchange_weak(&skip, &k,
                                                                  k - 1))
                        ;
                    if (k > 0)
                        a = 0; /* let this one through */
                }
                while (a > 0 && !atomic_compare_exchange_weak(&armed, &a, a - 1))
                    ;
                if (a > 0) {
                    start = off + st;
                    end = off + e;
                    cut = 1;
                    break;
                }
                off += e;
            }
            if (cut) {
                if (call)
                    atomic_fetch_add(&cuts_call, 1);
                long total = atomic_load(&cuts_after) + atomic_load(&cuts_before);
                if (total % 2 == 0) {
                    (void)write_all(s, buf, end);
                    atomic_fetch_add(&cuts_after, 1);
                } else {
                    (void)write_all(s, buf, start);
                    atomic_fetch_add(&cuts_before, 1);
                }
                break;
            }
            if (write_all(s, buf, (size_t)n) != 0)
                break;
        }
    }
    /* Close both sides at once: the client sees the connection drop. */
    struct linger lg = {1, 0};
    setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(s);
    close(c);
    return NULL;
}

static void *control(void *arg)
{
    (void)arg;
    char line[64];
    while (fgets(line, sizeof line, stdin)) {
        if (line[0] == 'c') {
            int n = atoi(line + 1);
            if (n > 1)
                atomic_store(&skip, n - 1);
            atomic_fetch_add(&armed, 1);
        } else if (line[0] == 'k') {
            atomic_fetch_add(&armed_call, 1);
        } else if (line[0] == 's') {
            pthread_mutex_lock(&out_mu);
            long a = atomic_load(&cuts_after), b = atomic_load(&cuts_before);
            printf("cuts %ld %ld %ld %d %ld\n", a + b, a, b,
                   atomic_load(&armed) + atomic_load(&armed_call),
                   (long)atomic_load(&cuts_call));
            fflush(stdout);
            pthread_mutex_unlock(&out_mu);
        } else if (line[0] == 'x') {
            atomic_store(&armed, 0); /* disarm what is left */
            atomic_store(&armed_call, 0);
        }
    }
    exit(0); /* our parent is gone or done */
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--unix") && i + 1 < argc)
            unix_path = argv[++i];
        else {
            fprintf(stderr, "usage: cutproxy --unix PATH\n");
            return 2;
        }
    }
    if (!unix_path) {
        fprintf(stderr, "usage: cutproxy --unix PATH\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in in;
    memset(&in, 0, sizeof in);
    in.sin_family = AF_INET;
    in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&in, sizeof in) != 0 ||
        listen(lfd, 1024) != 0) {
        perror("cutproxy: listen on 127.0.0.1");
        return 1;
    }
    socklen_t sl = sizeof in;
    getsockname(lfd, (struct sockaddr *)&in, &sl);
    printf("%u\n", (unsigned)ntohs(in.sin_port));
    fflush(stdout);

    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&at, 256 * 1024);
    pthread_t t;
    if (pthread_create(&t, &at, control, NULL) != 0)
        return 1;
    for (;;) {
        int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            perror("cutproxy: accept");
            usleep(10000);
            continue;
        }
        setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un sa;
        memset(&sa, 0, sizeof sa);
        sa.sun_family = AF_UNIX;
        snprintf(sa.sun_path, sizeof sa.sun_path, "%s", unix_path);
        if (s < 0 || connect(s, (struct sockaddr *)&sa, sizeof sa) != 0) {
            /* server down (being restarted): the client sees a refused
             * connection and retries */
            if (s >= 0)
                close(s);
            close(c);
            continue;
        }
        struct conn *cn = malloc(sizeof *cn);
        if (!cn) {
            close(s);
            close(c);
            continue;
        }
        cn->c = c;
        cn->s = s;
        if (pthread_create(&t, &at, relay, cn) != 0) {
            free(cn);
            close(s);
            close(c);
        }
    }
}
