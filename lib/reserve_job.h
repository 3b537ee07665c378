/*
 * reserve_job.h - what the files of a reserve share (reserve.c,
 * reserve_job.c, reserve_proc.c, sold_out.c): the job (a cart's distinct
 * (item, location) keys, what each pass reads at each and where each line
 * is held) and the outcomes by which one path hands over to another.
 * Private to the library, like internal.h.
 */
#ifndef RSV_RESERVE_JOB_H
#define RSV_RESERVE_JOB_H

#include "internal.h"

/* A path's outcome besides RSV_OK and the RSV_E* codes: what next. */
#define NEED_SLOW 1       /* job_allocate(): the fast path cannot decide */
#define NEED_RESCAN 2     /* a read from a spread start came up short */
#define NEED_STATEMENTS 3 /* the procedure did nothing: send statements */
#define NEED_FAST 4       /* the slow path found the pools refilled since */
#define NEED_WIDE 5       /* a line's first location cannot cover it */
#define NEED_EXCL 6       /* the slow path waited in share mode for nothing:
                             again, locking the ledger rows exclusively */

typedef struct rkey {
    uint64_t item, loc;
    int64_t want;        /* LIMIT of the pool read (this pass) */
    int64_t want_all;    /* units of every line that may use the key */
    int64_t want_first;  /* units of the lines that name it first */
    uint64_t start;      /* the pool read begins at this id */
    uint64_t *ids;       /* pool rows read, ascending (statement path) */
    size_t nids, cap_ids;
    uint64_t first_id, last_id; /* lowest and highest pool id read */
    size_t used;         /* ids allocated to lines */
    int64_t direct;      /* units issued straight from the ledger */
    int64_t ledger_took; /* units a procedure took straight from the
                            ledger row (it was free and covered the key);
                            when it rolled back, what it could have held */
    int64_t minted;      /* pool rows a procedure's pending top-up minted
                            (-1: the ledger row was held elsewhere) */
    int64_t take;        /* units held at this key in total */
    int have_hint;
    uint64_t hint_next;  /* next_unit_id as last committed */
    uint64_t fast_next;  /* hint_next of the last fast-path read that came
                            up short, else 0 (kept across passes) */
    int64_t fast_avail;  /* and hint_avail of that read */
    int64_t hint_avail;  /* on_hand - issued as last committed */
    int so_ask;          /* the sold-out read asks about this key: */
    int so_found;        /* its ledger row exists, */
    int so_live;         /* units may come back (pool rows, expired
                            holds, releases not folded, a re-reserve's
                            own holds), */
    int64_t so_avail;    /* and on_hand - issued */
    rsv_level lv;        /* slow path: the locked ledger row */
} rkey;

typedef struct rjob {
    uint64_t shop;
    const void *token;
    size_t len;
    rsv_cart *cart;
    int64_t ttl_ms;
    rkey *keys;
    size_t nkeys;
    size_t *line_keys;   /* per line, per location: index into keys */
    size_t *line_off;    /* per line: offset into line_keys */
    int prev_found, prev_status;
    uint32_t prev_gen;
    int rescan;          /* read every pool from its bottom */
    uint64_t *pairs;     /* the keys as (item, location) pairs */
    int back_to_fast;    /* times the slow path went back (NEED_FAST) */
    int ledger_excl;     /* this slow path locks the ledger rows FOR
                            UPDATE at once (see ledger_mode) */
    int wide;            /* pool reads at every candidate location, not
                            only at each line's first (see job_set_wants) */
} rjob;

/* reserve_job.c: building the job, each pass's reads, the allocation */
RSV_HIDDEN int job_build(rsv_ctx *ctx, rjob *j);
RSV_HIDDEN void job_free(rjob *j);
RSV_HIDDEN void job_set_wants(rjob *j);
RSV_HIDDEN void job_reset_pass(rjob *j);
RSV_HIDDEN rkey *job_line_key(const rjob *j, size_t l, size_t i);
RSV_HIDDEN void job_ledger_keys(rsv_buf *s, uint32_t n);
RSV_HIDDEN int job_allocate(rsv_ctx *ctx, rjob *j, int slow);
RSV_HIDDEN int job_line_short(rsv_ctx *ctx, rsv_cart *c, size_t l);
RSV_HIDDEN void job_choose_starts(rsv_ctx *ctx, rjob *j);
RSV_HIDDEN void job_note_read(rsv_ctx *ctx, const rjob *j, const rkey *k);
RSV_HIDDEN void job_note_reads(rsv_ctx *ctx, rjob *j);

/* reserve_proc.c: the fast path in one round trip */
RSV_HIDDEN int reserve_proc_fits(const rsv_ctx *ctx, const rjob *j);
RSV_HIDDEN int reserve_proc_body(rsv_ctx *ctx, void *p);

/* sold_out.c: "out of stock" without the ledger row lock */
RSV_HIDDEN int sold_out_unlocked(rsv_ctx *ctx, rjob *j);
RSV_HIDDEN int sold_out_first(rsv_ctx *ctx, rjob *j);

#endif
