/*
 * sp_bench.c - the prototype measurement of tests/bench/sp/run.sh: N client
 * threads, each on its own connection, reserve one unit of one item for a
 * new checkout token each time, for a 5 s window after 1 s of warm-up,
 * either with CALL rsv_sp_reserve1 (sp_reserve.sql: the fast path in one
 * round trip) or with rsv_reserve_one (the library today).  Prints one
 * line in the bench's format (design=sp-prototype|libreserve).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mysql.h>

#include "reserve.h"

#define MAX_CLIENTS 256
#define MAX_SAMPLES 200000

static const char *sock, *db;
static int port, use_sp, nclients, rtt_us;
static volatile int go, measuring, stop;
static uint64_t *lat[MAX_CLIENTS];
static long nlat[MAX_CLIENTS];

static uint64_t now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000u + (uint64_t)t.tv_nsec / 1000u;
}

static void die(const char *what, const char *msg)
{
    fprintf(stderr, "sp_bench: %s: %s\n", what, msg);
    exit(1);
}

static void call_sp(MYSQL_STMT *st, const char *tok, unsigned seed_start)
{
    MYSQL_BIND b[3];
    memset(b, 0, sizeof b);
    unsigned long long shop = 77, start = 1 + seed_start % 190000;
    unsigned long tl = (unsigned long)strlen(tok);
    b[0].buffer_type = MYSQL_TYPE_LONGLONG;
    b[0].buffer = &shop;
    b[0].is_unsigned = 1;
    b[1].buffer_type = MYSQL_TYPE_BLOB;
    b[1].buffer = (void *)tok;
    b[1].buffer_length = tl;
    b[1].length = &tl;
    b[2].buffer_type = MYSQL_TYPE_LONGLONG;
    b[2].buffer = &start;
    b[2].is_unsigned = 1;
    if (mysql_stmt_bind_param(st, b) || mysql_stmt_execute(st))
        die("CALL", mysql_stmt_error(st));
    do {
        if (mysql_stmt_field_count(st)) {
            mysql_stmt_store_result(st);
            mysql_stmt_free_result(st);
        }
    } while (mysql_stmt_next_result(st) == 0);
}

static void *client(void *p)
{
    long id = (long)p;
    MYSQL *m = mysql_init(NULL);
    if (!mysql_real_connect(m, sock ? NULL : "127.0.0.1", "root", NULL, db,
                            (unsigned)port, sock, CLIENT_MULTI_RESULTS))
        die("connect", mysql_error(m));
    rsv_ctx *ctx = NULL;
    MYSQL_STMT *st = mysql_stmt_init(m);
    if (use_sp) {
        const char *q = "CALL rsv_sp_reserve1(?, ?, 1, 1, ?, 600000000)";
        if (mysql_stmt_prepare(st, q, (unsigned long)strlen(q)))
            die("prepare", mysql_stmt_error(st));
    } else {
        rsv_options o;
        rsv_options_init(&o, RSV_OPTIONS_VERSION);
        /* the pool was filled up front: no refill (and no count of
         * 200,000 rows) during the window */
        o.flags = RSV_OPT_NO_PROACTIVE_REFILL;
        if (rsv_open(&ctx, m, &o) != RSV_OK)
            die("rsv_open", rsv_errmsg(ctx));
    }
    unsigned seed = (unsigned)id * 7919u + 1;
    long n = 0;
    while (!go)
        usleep(1000);
    while (!stop) {
        char tok[64];
        snprintf(tok, sizeof tok, "sp-%d-%ld-%ld-%d", (int)getpid(), id, n++,
                 use_sp);
        uint64_t t0 = now_us();
        if (use_sp) {
            call_sp(st, tok, (unsigned)rand_r(&seed));
        } else {
            int rc = rsv_reserve_one(ctx, 77, tok, strlen(tok), 1, 1, 1, 600000);
            if (rc != RSV_OK)
                die("rsv_reserve_one", rsv_errmsg(ctx));
        }
        if (measuring && nlat[id] < MAX_SAMPLES)
            lat[id][nlat[id]++] = now_us() - t0;
    }
    mysql_stmt_close(st);
    rsv_close(ctx);
    mysql_close(m);
    return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--socket")) sock = argv[i + 1];
        else if (!strcmp(argv[i], "--port")) port = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--db")) db = argv[i + 1];
        else if (!strcmp(argv[i], "--mode")) use_sp = !strcmp(argv[i + 1], "sp");
        else if (!strcmp(argv[i], "--clients")) nclients = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--rtt-us")) rtt_us = atoi(argv[i + 1]);
    }
    if (!db || nclients < 1 || nclients > MAX_CLIENTS || (!sock && !port)) {
        fprintf(stderr, "usage: sp_bench (--socket PATH | --port N) --db NAME "
                        "--mode sp|lib --clients N [--rtt-us N]\n");
        return 2;
    }
    pthread_t t[MAX_CLIENTS];
    for (long i = 0; i < nclients; i++) {
        lat[i] = malloc(MAX_SAMPLES * sizeof **lat);
        if (!lat[i])
            die("malloc", "out of memory");
        pthread_create(&t[i], NULL, client, (void *)i);
    }
    sleep(1);
    go = 1;
    sleep(1);
    measuring = 1;
    sleep(5);
    measuring = 0;
    stop = 1;
    long n = 0;
    for (int i = 0; i < nclients; i++) {
        pthread_join(t[i], NULL);
        n += nlat[i];
    }
    uint64_t *all = malloc((size_t)(n ? n : 1) * sizeof *all);
    if (!all)
        die("malloc", "out of memory");
    long k = 0;
    for (int i = 0; i < nclients; i++)
        for (long j = 0; j < nlat[i]; j++)
            all[k++] = lat[i][j];
    qsort(all, (size_t)n, sizeof *all, cmp_u64);
    printf("bench design=%s workload=flash1 clients=%d rtt_us=%d ops_per_s=%ld "
           "p50_us=%llu p99_us=%llu p999_us=%llu\n",
           use_sp ? "sp-prototype" : "libreserve", nclients, rtt_us, n / 5,
           n ? (unsigned long long)all[n / 2] : 0ULL,
           n ? (unsigned long long)all[n * 99 / 100] : 0ULL,
           n ? (unsigned long long)all[n * 999 / 1000] : 0ULL);
    return 0;
}
