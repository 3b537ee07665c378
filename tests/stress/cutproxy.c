/*
 * cutproxy.c - a TCP proxy that cuts connections at commit points.
 *
 * Listens on 127.0.0.1 (ephemeral port) and forwards every connection to a
 * Unix socket (the throwaway server's), byte for byte, one thread per
 * connection.  It follows both streams as MySQL packets (3-byte length,
 * 1-byte sequence number) and recognizes every command that can commit:
 *
 *   commit        a COM_QUERY (0x03) whose text, after blanks and comments
 *                 (the library's conn_tag comment), begins with the word
 *                 COMMIT: "COMMIT", "COMMIT AND NO CHAIN", "COMMIT WORK";
 *   <proc>_call   a CALL of a stored procedure, since the library's
 *                 procedures commit inside the one statement: sent as text
 *                 (COM_QUERY), or prepared (COM_STMT_PREPARE, 0x16) and
 *                 then executed (COM_STMT_EXECUTE, 0x17).  For a prepared
 *                 one the proxy reads the statement id from the server's
 *                 PREPARE_OK and remembers its kind until COM_STMT_CLOSE;
 *                 the execute of id 0xffffffff (prepare and execute sent
 *                 back to back) means the statement prepared last.
 *
 * A text may be wrapped in MariaDB's "SET STATEMENT var = value, ... FOR"
 * (the library sends its lock-wait timeout that way); what follows FOR is
 * classified.  The CALL kinds are told apart by procedure name:
 * reserve_call (rsv_reserve_key*), cart_call (rsv_fast_cart*),
 * settle_call (rsv_settle*: claims and releases, told apart by the
 * procedure's last argument in the execute, 2 claim, 3 release),
 * reserve_batch_call (rsv_reserve_batch*, rsv_reserve_cart_batch*),
 * settle_batch_call
 * (rsv_settle_batch*, claims and releases told apart the same way) and
 * other_call (any other procedure).  A batch CALL whose text begins with
 * the comment of the conn_tag prefix "batcher:" (the stress's batcher
 * clients set it) is a batcher_call instead, so that the batcher's
 * batches are counted, armed and cut on their own.  Only the first
 * packet of a command counts (sequence 0); texts of more than one
 * statement are not split (the library sends none).
 *
 * A "p X" line on standard input makes every commit point, of any kind
 * and on any connection, be cut with probability X (0 to 1; the
 * orchestrator adjusts it to the rate of commit points): so each kind is
 * cut in proportion to how often it is sent, however its commit points
 * are spaced in time.  (Cutting the first commit point after a moment
 * chosen in time would not be: it favours those that follow a quiet gap,
 * and those that come in dense bursts, a sweep's batches or the commits
 * released together after a lock storm, would hardly ever be cut.)
 * The cuts of each kind (claims and releases of each settle kind each)
 * alternate
 *   - after forwarding the command (the server commits, the client never
 *     hears), and
 *   - before forwarding it (the server rolls back when the session dies),
 * by closing both sides at once.  Either way the client sees the
 * connection drop while it waits for the answer: the outcome is unknown to
 * it (RSV_EINDOUBT), which is the point.
 *
 * Other lines: "c" arms one cut of the next commit point of any kind,
 * "c N" of the N-th (it lets N-1 through: reproducers); "k KIND" arms a
 * cut of the next commit point of one kind (commit, reserve, cart, settle,
 * other, rbatch, sbatch, batcher; "k" alone: reserve); "x" disarms what
 * is left and sets the probability to 0; "s" prints
 *   cuts <done> <after> <before> <armed> <cut by kind x8> <seen by kind x8>
 *        <settle cut x3> <settle seen x3> <settle batch cut x3>
 *        <settle batch seen x3> <cut after forwarding by kind x8>
 * on standard output, the kinds in the order commit, reserve_call,
 * cart_call, settle_call, other_call, reserve_batch_call,
 * settle_batch_call, batcher_call ("seen": commit points forwarded or
 * cut, whether armed or not), then the settle and settle batch CALLs by
 * what they do: unknown, claim, release.  End of file on standard input
 * stops the proxy.
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
#include <time.h>
#include <unistd.h>

/* Kinds of commit point; K_NONE: a command that does not commit. */
enum { K_COMMIT, K_RESERVE, K_CART, K_SETTLE, K_OTHER, K_RBATCH, K_SBATCH,
       K_BATCHER, NKINDS, K_NONE = -1 };
static const char *const kind_names[NKINDS] = {
    "commit", "reserve", "cart", "settle", "other", "rbatch", "sbatch",
    "batcher"};
/* What a settle CALL (one checkout or a batch) does: its last argument is
 * the state it settles to (2 claimed, 3 released, as in
 * rsv_checkouts.status). */
enum { S_UNKNOWN, S_CLAIM, S_RELEASE, NSUBS };
/* The kinds split by what they settle, and their row in the arrays. */
static int sub_row(int kind)
{
    return kind == K_SETTLE ? 0 : kind == K_SBATCH ? 1 : -1;
}

static const char *unix_path;
static atomic_int armed;               /* cuts armed for any kind */
static atomic_int armed_kind[NKINDS];  /* cuts armed for one kind */
static atomic_int skip; /* commit points to let through before the cut */
static atomic_long cuts_kind[NKINDS], seen_kind[NKINDS];
static atomic_long after_kind[NKINDS]; /* cut after forwarding */
static atomic_long cuts_sub[2][NSUBS], seen_sub[2][NSUBS]; /* by sub_row */
static atomic_long cuts_after, cuts_before;
static atomic_ullong cut_threshold; /* "p X": X * 2^64 */
static pthread_mutex_t out_mu = PTHREAD_MUTEX_INITIALIZER;

/* Prepared statements a connection keeps; a COM_STMT_CLOSE frees a slot,
 * and when all are taken the oldest is forgotten (its executes then go
 * uncounted: far more than the library's statement cache holds). */
#define MAX_STMTS 512
#define HEAD_MAX 4096 /* first payload bytes kept: enough for a tag, a
                         SET STATEMENT prefix and a CALL's name, and for
                         the last argument of a settle batch's execute
                         after its JSON (a few dozen entries) */

/* Parser of one direction's packet stream. */
struct pstate {
    unsigned char hdr[4];
    int hdr_got;
    size_t left;             /* payload bytes still to come */
    int candidate;           /* seq 0: a command packet */
    int seq;                 /* its sequence number */
    size_t len;              /* its payload length */
    unsigned char head[HEAD_MAX]; /* first payload bytes */
    size_t head_got;
};

#define MAX_PARAMS 16

/* A prepared statement that commits. */
struct pstmt {
    uint32_t id;
    int kind;
    unsigned nparams;               /* from its PREPARE_OK */
    int have_types;                 /* types[] were sent once */
    unsigned char types[MAX_PARAMS]; /* parameter types, as last sent */
};

/* Per connection: the prepared statements that commit, by id. */
struct stmts {
    int pending;        /* a COM_STMT_PREPARE awaits its answer */
    int pending_kind;   /* its kind (K_NONE: it does not commit) */
    int last_kind;      /* kind of the statement prepared last */
    struct pstmt s[MAX_STMTS];
    int n, next;        /* used slots; the slot to reuse when full */
};

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

/* Consume bytes of buf from *i until a packet ends (1: its first bytes
 * are in ps->head, ps->candidate says whether it is a command) or buf runs
 * out (0).  *pkt_start: offset in buf of the last packet header begun in
 * this buf. */
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
                ps->len = ps->left;
                ps->seq = ps->hdr[3];
                ps->candidate = ps->hdr[3] == 0;
                ps->head_got = 0;
                if (ps->left == 0) {
                    ps->hdr_got = 0;
                    return 1;
                }
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

static int is_space(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f';
}

static int is_ident(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
           (c >= '0' && c <= '9') || c == '_' || c == '$' || c >= 0x80;
}

/* Skip blanks and comments (block, "-- " and "#" to the end of line). */
static size_t skip_blank(const unsigned char *p, size_t n, size_t i)
{
    for (;;) {
        while (i < n && is_space(p[i]))
            i++;
        if (i + 1 < n && p[i] == '/' && p[i + 1] == '*') {
            i += 2;
            while (i + 1 < n && !(p[i] == '*' && p[i + 1] == '/'))
                i++;
            if (i + 1 >= n)
                return n;
            i += 2;
            continue;
        }
        if (i < n && (p[i] == '#' || (i + 2 < n && p[i] == '-' &&
                                      p[i + 1] == '-' && is_space(p[i + 2])))) {
            while (i < n && p[i] != '\n')
                i++;
            continue;
        }
        return i;
    }
}

/* Does the word w (case-insensitive, whole word) start at p[i]? */
static int word_at(const unsigned char *p, size_t n, size_t i, const char *w)
{
    size_t k = strlen(w);
    if (n - i < k || strncasecmp((const char *)p + i, w, k) != 0)
        return 0;
    return i + k == n || !is_ident(p[i + k]);
}

static int proc_kind(const unsigned char *p, size_t n, size_t i)
{
    /* the name, possibly `quoted` and qualified: keep its last part */
    size_t start = i;
    while (i < n && (is_ident(p[i]) || p[i] == '`' || p[i] == '.')) {
        if (p[i] == '.')
            start = i + 1;
        i++;
    }
    if (start < n && p[start] == '`')
        start++;
    size_t len = i - start;
    static const struct {
        const char *prefix;
        int kind;
    } procs[] = {{"rsv_reserve_key", K_RESERVE},
                 {"rsv_fast_cart", K_CART},
                 {"rsv_reserve_batch", K_RBATCH},
                 {"rsv_reserve_cart_batch", K_RBATCH},
                 {"rsv_settle_batch", K_SBATCH}, /* before rsv_settle */
                 {"rsv_settle", K_SETTLE}};
    for (size_t k = 0; k < sizeof procs / sizeof procs[0]; k++) {
        size_t pl = strlen(procs[k].prefix);
        if (len >= pl &&
            strncasecmp((const char *)p + start, procs[k].prefix, pl) == 0)
            return procs[k].kind;
    }
    return K_OTHER;
}

/* The kind of commit point a statement text is, by its words alone. */
static int text_kind_of(const unsigned char *p, size_t n)
{
    size_t i = skip_blank(p, n, 0);
    if (word_at(p, n, i, "SET")) {
        size_t j = skip_blank(p, n, i + 3);
        if (!word_at(p, n, j, "STATEMENT"))
            return K_NONE;
        /* the variable assignments hold no FOR of their own (numbers and
         * names); find the keyword that ends them */
        for (j += 9; j < n; j++)
            if ((j == 0 || !is_ident(p[j - 1])) && word_at(p, n, j, "FOR"))
                break;
        if (j >= n)
            return K_NONE;
        i = skip_blank(p, n, j + 3);
    }
    if (word_at(p, n, i, "COMMIT"))
        return K_COMMIT;
    if (word_at(p, n, i, "CALL"))
        return proc_kind(p, n, skip_blank(p, n, i + 4));
    return K_NONE;
}

/* Does the text begin with the batcher's conn_tag comment ("/" "*
 * batcher:...")? */
static int batcher_tagged(const unsigned char *p, size_t n)
{
    size_t i = 0;
    while (i < n && is_space(p[i]))
        i++;
    if (i + 1 >= n || p[i] != '/' || p[i + 1] != '*')
        return 0;
    for (i += 2; i < n && is_space(p[i]); i++)
        ;
    return word_at(p, n, i, "batcher");
}

/* The kind of commit point a statement text is, or K_NONE. */
static int text_kind(const unsigned char *p, size_t n)
{
    int k = text_kind_of(p, n);
    if ((k == K_RBATCH || k == K_SBATCH) && batcher_tagged(p, n))
        return K_BATCHER;
    return k;
}

static struct pstmt *stmt_find(struct stmts *st, uint32_t id)
{
    for (int i = 0; i < st->n; i++)
        if (st->s[i].id == id)
            return &st->s[i];
    return NULL;
}

static void stmt_forget(struct stmts *st, uint32_t id)
{
    struct pstmt *p = stmt_find(st, id);
    if (p) {
        *p = st->s[st->n - 1];
        st->n--;
    }
}

static void stmt_remember(struct stmts *st, uint32_t id, int kind,
                          unsigned nparams)
{
    int slot;
    if (st->n < MAX_STMTS) {
        slot = st->n++;
    } else {
        slot = st->next;
        st->next = (st->next + 1) % MAX_STMTS;
    }
    memset(&st->s[slot], 0, sizeof st->s[slot]);
    st->s[slot].id = id;
    st->s[slot].kind = kind;
    st->s[slot].nparams = nparams;
}

/* A length-encoded integer at p[*i] (0 if it runs past n). */
static uint64_t lenenc(const unsigned char *p, size_t n, size_t *i)
{
    if (*i >= n)
        return 0;
    unsigned char c = p[(*i)++];
    size_t w = c < 0xfb ? 0 : c == 0xfc ? 2 : c == 0xfd ? 3 : c == 0xfe ? 8 : 0;
    if (w == 0)
        return c < 0xfb ? c : 0;
    uint64_t v = 0;
    for (size_t k = 0; k < w && *i < n; k++)
        v |= (uint64_t)p[(*i)++] << (8 * k);
    return v;
}

/* The last argument of a COM_STMT_EXECUTE (p, n: its first bytes) if it is
 * an integer, else -1.  Binary protocol: command, id (4), flags, iteration
 * count (4), null bitmap, "types follow" flag, types (2 bytes each), then
 * the values; the types are sent again only when the client rebinds, so
 * they are kept from the last execute that sent them. */
static long long last_int_arg(struct pstmt *ps, const unsigned char *p,
                              size_t n)
{
    unsigned np = ps->nparams;
    if (np == 0 || np > MAX_PARAMS)
        return -1;
    size_t i = 10, nb = (np + 7) / 8;
    if (i + nb + 1 > n)
        return -1;
    const unsigned char *nulls = p + i;
    i += nb;
    if (p[i++]) {
        if (i + 2 * (size_t)np > n)
            return -1;
        for (unsigned k = 0; k < np; k++)
            ps->types[k] = p[i + 2 * k];
        ps->have_types = 1;
        i += 2 * (size_t)np;
    } else if (!ps->have_types) {
        return -1;
    }
    for (unsigned k = 0; k < np && i <= n; k++) {
        if (nulls[k / 8] & (1u << (k % 8))) {
            if (k + 1 == np)
                return -1;
            continue;
        }
        size_t len;
        switch (ps->types[k]) {
        case 1: /* TINY */
            len = 1;
            break;
        case 2: case 13: /* SHORT, YEAR */
            len = 2;
            break;
        case 3: case 4: case 9: /* LONG, FLOAT, INT24 */
            len = 4;
            break;
        case 5: case 8: /* DOUBLE, LONGLONG */
            len = 8;
            break;
        case 6: /* NULL */
            len = 0;
            break;
        case 7: case 10: case 11: case 12: /* temporal: a length byte */
            len = i < n ? 1 + (size_t)p[i] : 0;
            break;
        default: /* strings and blobs: length-encoded */
            len = (size_t)lenenc(p, n, &i);
        }
        if (k + 1 == np) {
            int is_int = ps->types[k] == 1 || ps->types[k] == 2 ||
                         ps->types[k] == 3 || ps->types[k] == 8 ||
                         ps->types[k] == 9;
            if (!is_int || i + len > n)
                return -1;
            int64_t v = 0;
            for (size_t b = 0; b < len; b++)
                v |= (int64_t)((uint64_t)p[i + b] << (8 * b));
            return (long long)v;
        }
        i += len;
    }
    return -1;
}

/* Server -> client bytes: the answer to a COM_STMT_PREPARE is a packet
 * with sequence number 1: PREPARE_OK (0x00, the statement id, the number
 * of columns, the number of parameters) or an error (0xff). */
static void feed_server(struct pstate *ps, struct stmts *st,
                        const unsigned char *buf, size_t n)
{
    size_t i = 0, pkt_start = 0;
    while (next_packet(ps, buf, n, &i, &pkt_start)) {
        if (!st->pending || ps->seq != 1 || ps->head_got < 1)
            continue;
        if (ps->head[0] == 0x00 && ps->head_got >= 9) {
            st->pending = 0;
            if (st->pending_kind != K_NONE)
                stmt_remember(st, le32(ps->head + 1), st->pending_kind,
                              (unsigned)ps->head[7] |
                                  (unsigned)ps->head[8] << 8);
        } else if (ps->head[0] == 0xff) {
            st->pending = 0;
        }
    }
}

/* Client -> server: the kind of commit point this command is (K_NONE if
 * none), and for a settle CALL whether it claims or releases (*sub);
 * prepares and closes update the connection's statements. */
static int command_kind(struct stmts *st, const unsigned char *p, size_t n,
                        int *sub)
{
    *sub = S_UNKNOWN;
    if (n < 1)
        return K_NONE;
    switch (p[0]) {
    case 0x03: /* COM_QUERY */
        return text_kind(p + 1, n - 1);
    case 0x16: /* COM_STMT_PREPARE */
        st->pending = 1;
        st->pending_kind = text_kind(p + 1, n - 1);
        st->last_kind = st->pending_kind;
        return K_NONE;
    case 0x17: { /* COM_STMT_EXECUTE */
        if (n < 5)
            return K_NONE;
        uint32_t id = le32(p + 1);
        if (id == 0xffffffffu) /* prepared just before, answer unread */
            return st->last_kind;
        struct pstmt *ps = stmt_find(st, id);
        if (!ps)
            return K_NONE;
        if (sub_row(ps->kind) >= 0) {
            long long v = last_int_arg(ps, p, n);
            *sub = v == 2 ? S_CLAIM : v == 3 ? S_RELEASE : S_UNKNOWN;
        }
        return ps->kind;
    }
    case 0x19: /* COM_STMT_CLOSE */
        if (n >= 5)
            stmt_forget(st, le32(p + 1));
        return K_NONE;
    default:
        return K_NONE;
    }
}

/* Feed bytes; returns the offset just past the end of a commit point's
 * packet found in buf (and *start its first byte, or 0 if it began in an
 * earlier chunk, *kind its kind), or 0 if none ended in buf. */
static size_t feed(struct pstate *ps, struct stmts *st,
                   const unsigned char *buf, size_t n, size_t *start,
                   int *kind, int *sub)
{
    size_t i = 0, pkt_start = 0;
    while (next_packet(ps, buf, n, &i, &pkt_start)) {
        if (!ps->candidate)
            continue;
        int k = command_kind(st, ps->head, ps->head_got, sub);
        if (k != K_NONE) {
            *start = pkt_start;
            *kind = k;
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

/* Take one armed cut from *a, if there is one. */
static int take(atomic_int *a)
{
    int k = atomic_load(a);
    while (k > 0 && !atomic_compare_exchange_weak(a, &k, k - 1))
        ;
    return k > 0;
}

/* splitmix64 on one shared counter: every connection thread draws from
 * the same sequence (a generator per thread, seeded from what a new
 * thread has, would repeat itself on the threads that replace the cut
 * connections, and cut them at the same place again) */
static atomic_ullong rng_state = 0x5DEECE66DULL;

static uint64_t rng_next(void)
{
    uint64_t z = atomic_fetch_add(&rng_state, 0x9E3779B97F4A7C15ULL) +
                 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* Is this commit point (of kind k) to be cut? */
static int cut_here(int k)
{
    if (take(&armed_kind[k]))
        return 1;
    unsigned long long th = atomic_load(&cut_threshold);
    if (th && rng_next() < th)
        return 1;
    if (atomic_load(&armed) <= 0)
        return 0;
    if (take(&skip))
        return 0; /* let this one through */
    return take(&armed);
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
    struct stmts *st = calloc(1, sizeof *st);
    memset(&ps, 0, sizeof ps);
    memset(&sps, 0, sizeof sps);
    static _Thread_local unsigned char buf[65536];
    struct pollfd pf[2] = {{c, POLLIN, 0}, {s, POLLIN, 0}};
    while (st) {
        if (poll(pf, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (pf[1].revents) {
            ssize_t n = recv(s, buf, sizeof buf, 0);
            if (n > 0)
                feed_server(&sps, st, buf, (size_t)n);
            if (n <= 0 || write_all(c, buf, (size_t)n) != 0)
                break;
        }
        if (pf[0].revents) {
            ssize_t n = recv(c, buf, sizeof buf, 0);
            if (n <= 0)
                break;
            size_t start = 0, end = 0, off = 0;
            int cut = 0, kind = K_NONE, sub = S_UNKNOWN;
            /* find the commit points in this chunk; cut at the first one
             * armed */
            while (off < (size_t)n) {
                size_t sta = 0;
                size_t e = feed(&ps, st, buf + off, (size_t)n - off, &sta,
                                &kind, &sub);
                if (e == 0)
                    break;
                atomic_fetch_add(&seen_kind[kind], 1);
                if (sub_row(kind) >= 0)
                    atomic_fetch_add(&seen_sub[sub_row(kind)][sub], 1);
                if (cut_here(kind)) {
                    start = off + sta;
                    end = off + e;
                    cut = 1;
                    break;
                }
                off += e;
            }
            if (cut) {
                /* each kind (claims and releases of a settle kind each)
                 * alternates: after, before, after, ... */
                long nth = atomic_fetch_add(&cuts_kind[kind], 1);
                if (sub_row(kind) >= 0)
                    nth = atomic_fetch_add(&cuts_sub[sub_row(kind)][sub], 1);
                if (nth % 2 == 0) {
                    (void)write_all(s, buf, end);
                    atomic_fetch_add(&cuts_after, 1);
                    atomic_fetch_add(&after_kind[kind], 1);
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
    free(st);
    /* Close both sides at once: the client sees the connection drop. */
    struct linger lg = {1, 0};
    setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(s);
    close(c);
    return NULL;
}

static int kind_named(const char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    if (!*s || *s == '\n')
        return K_RESERVE;
    for (int k = 0; k < NKINDS; k++)
        if (strncmp(s, kind_names[k], strlen(kind_names[k])) == 0)
            return k;
    return K_NONE;
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
            int k = kind_named(line + 1);
            if (k != K_NONE)
                atomic_fetch_add(&armed_kind[k], 1);
        } else if (line[0] == 's') {
            pthread_mutex_lock(&out_mu);
            long a = atomic_load(&cuts_after), b = atomic_load(&cuts_before);
            int left = atomic_load(&armed);
            for (int k = 0; k < NKINDS; k++)
                left += atomic_load(&armed_kind[k]);
            printf("cuts %ld %ld %ld %d", a + b, a, b, left);
            for (int k = 0; k < NKINDS; k++)
                printf(" %ld", (long)atomic_load(&cuts_kind[k]));
            for (int k = 0; k < NKINDS; k++)
                printf(" %ld", (long)atomic_load(&seen_kind[k]));
            for (int r = 0; r < 2; r++) {
                for (int k = 0; k < NSUBS; k++)
                    printf(" %ld", (long)atomic_load(&cuts_sub[r][k]));
                for (int k = 0; k < NSUBS; k++)
                    printf(" %ld", (long)atomic_load(&seen_sub[r][k]));
            }
            for (int k = 0; k < NKINDS; k++)
                printf(" %ld", (long)atomic_load(&after_kind[k]));
            printf("\n");
            fflush(stdout);
            pthread_mutex_unlock(&out_mu);
        } else if (line[0] == 'p') {
            double p = atof(line + 1);
            atomic_store(&cut_threshold,
                         p <= 0 ? 0ULL
                         : p >= 1 ? ~0ULL
                                  : (unsigned long long)(p * 18446744073709551616.0));
        } else if (line[0] == 'x') {
            atomic_store(&cut_threshold, 0ULL);
            atomic_store(&armed, 0); /* disarm what is left */
            atomic_store(&skip, 0);
            for (int k = 0; k < NKINDS; k++)
                atomic_store(&armed_kind[k], 0);
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
    atomic_store(&rng_state, (unsigned long long)time(NULL) * 0x2545F4914F6CDD1DULL ^
                                 (unsigned long long)getpid());
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
