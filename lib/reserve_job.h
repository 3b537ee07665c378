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

/* The passes one reserve may run; reserve_next() (reserve_next.c) picks
 * the next from what the last one read.  docs/internals.md has the table. */
typedef enum rpass {
    PASS_START,      /* (before the first pass) */
    PASS_SOLD_OUT,   /* one plain read: can the suspect lines be served?
                        (sold_out.c) */
    PASS_CALL,       /* the fast path in one round trip (reserve_proc.c) */
    PASS_STATEMENTS, /* the fast path by statements (reserve.c) */
    PASS_SLOW,       /* the slow path: ledger rows locked (reserve.c) */
    PASS_REFILL,     /* top-ups after a fast commit, own transactions */
    PASS_LEDGER,     /* the waited take: one key's units after waiting
                        for its ledger row, in share mode from the pool,
                        exclusively from the row itself (by procedure,
                        reserve_proc.c, else by statements, reserve.c) */
    PASS_DONE
} rpass;

/* How a pass ended when it did not end with a final code (RSV_OK or an
 * RSV_E* code): what it read that decides the next pass.  A body that ends
 * this way stores it in j->end and returns RSV__PASS_ENDED, which the frame
 * rolls back like any code but RSV_OK; nothing is then held. */
typedef enum rend {
    END_FINAL = 0,     /* the pass returned a final code */
    END_CURSOR_SHORT,  /* a pool read that began at the context's cursor
                          came up short: read again from the bottom */
    END_NARROW,        /* a line's first location cannot cover it: read
                          every location */
    END_NO_PROC,       /* the procedure cannot decide: send statements */
    END_SHORT,         /* a line not covered while the ledger may have
                          more: the waited ledger take or the slow path
                          (after the sold-out read if the ledger looked
                          short too); the waited ledger take: the row
                          could not give the units */
    END_REFILLED,      /* slow path: every short pool was refilled since
                          the fast read: the fast path again; the waited
                          take's wait in share mode by statements: over,
                          rolled back, the take follows */
    END_SHARED_IN_VAIN /* slow path: waited in share mode and nothing was
                          refilled: again, locking exclusively */
} rend;

/* What the decisions remember across the passes of one reserve. */
typedef struct rstate {
    int rescan;          /* read every pool from its bottom */
    int wide;            /* pool reads at every candidate location, not
                            only at each line's first (see job_set_wants) */
    int ledger_excl;     /* the slow path locks the ledger rows FOR
                            UPDATE at once (see reserve_ledger_mode) */
    int back_to_fast;    /* times the slow path went back */
    int then_slow;       /* the sold-out read is the one before the slow
                            path (else before the fast path) */
    int ledger_tried;    /* the waited take ran: 1 in share mode, 2 also
                            exclusively (each once a reserve) */
} rstate;

/* What reserve_next() needs to know besides the pass's end, gathered by
 * reserve_facts() before each decision. */
typedef struct rfacts {
    int proc_fits;       /* a procedure can do the fast pass (plan_for) */
    int marked_sold_out; /* some line's every location was found sold out
                            by this context before */
    int short_unsure;    /* some line came up short at a location whose
                            ledger could not cover it either */
    int ledger_fits;     /* a new checkout's one key came up short while
                            its ledger row had the units: the waited ledger
                            take can serve it (reserve_ledger_fits) */
} rfacts;

/* A pool row the statements read: its id and the units it carries. */
typedef struct prow {
    uint64_t id;
    int64_t units;
} prow;

/* One distinct (item, location) of the cart: what the plan wants there,
 * what the last pass read, what the allocation took, and what only one
 * path keeps.  job_reset_pass() forgets the read and the allocation. */
typedef struct rkey {
    uint64_t item, loc;
    struct {
        int64_t want;        /* units wanted; also the LIMIT of the
                                statements' pool read (rows: each has at
                                least one unit) */
        int64_t want_all;    /* units of every line that may use the key */
        int64_t want_first;  /* units of the lines that name it first */
        uint64_t start;      /* the pool read begins at this id */
    } plan;
    struct {
        prow *rows;          /* pool rows read, ascending (statements) */
        size_t nrows, cap_rows;
        int64_t units;       /* units in the rows read (statements), or
                                taken from the pool (procedures) */
        uint64_t first_id, last_id; /* lowest and highest pool id read */
        int64_t ledger_took; /* units a procedure took straight from the
                                ledger row (it was free and covered the
                                key); when it rolled back, what it could
                                have held */
        int64_t minted;      /* pool units a procedure's pending top-up
                                minted (-1: the ledger row was held
                                elsewhere) */
        int have_hint;
        uint64_t hint_next;  /* next_unit_id as last committed */
        int64_t hint_avail;  /* on_hand - issued as last committed */
    } read;
    struct {
        int64_t pool;        /* units allocated from the rows read: the
                                first rows whole, the last maybe in part
                                (rows_taken) */
        int64_t direct;      /* units issued straight from the ledger */
        int64_t take;        /* units held at this key in total */
    } alloc;
    struct {                 /* the slow path's: */
        uint64_t fast_next;  /* hint_next of the last fast read that came
                                up short, else 0 (kept across passes) */
        int64_t fast_avail;  /* and hint_avail of that read */
        ledger_row lv;        /* the locked ledger row */
    } slow;
    struct {                 /* the sold-out read's (sold_out.c): */
        int ask;             /* it asks about this key: */
        int found;           /* its ledger row exists, */
        int live;            /* units may come back (pool rows, expired
                                holds, releases not folded, a re-reserve's
                                own holds), */
        int64_t avail;       /* and on_hand - issued */
    } so;
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
    uint64_t *pairs;     /* the keys as (item, location) pairs */
    rstate st;           /* the decisions so far */
    rend end;            /* how the last pass ended (RSV__PASS_ENDED) */
} rjob;

/* reserve_job.c: building the job, each pass's reads, the allocation */
RSV_HIDDEN int job_build(rsv_ctx *ctx, rjob *j);
RSV_HIDDEN void job_free(rjob *j);
RSV_HIDDEN void job_set_wants(rjob *j);
RSV_HIDDEN void job_reset_pass(rjob *j);
RSV_HIDDEN rkey *job_line_key(const rjob *j, size_t l, size_t i);
RSV_HIDDEN void job_ledger_keys(strbuf *s, uint32_t n);
RSV_HIDDEN int job_allocate(rsv_ctx *ctx, rjob *j, int slow);
RSV_HIDDEN int job_line_short(rsv_ctx *ctx, rsv_cart *c, size_t l);
RSV_HIDDEN void job_choose_starts(rsv_ctx *ctx, rjob *j);
RSV_HIDDEN void job_note_read(rsv_ctx *ctx, const rjob *j, const rkey *k);
RSV_HIDDEN void job_note_reads(rsv_ctx *ctx, rjob *j);

/* reserve_proc.c: the fast path in one round trip, and the waited ledger
 * take in one (END_NO_PROC: the procedure cannot be called) */
RSV_HIDDEN int reserve_proc_fits(const rsv_ctx *ctx, const rjob *j);
RSV_HIDDEN int reserve_proc_body(rsv_ctx *ctx, void *p);
RSV_HIDDEN int reserve_proc_ledger_body(rsv_ctx *ctx, void *p);
/* For a batch (batch_call.c), whose one CALL does the one-key
 * procedure's work for many jobs of one key each: the top-up a job's
 * CALL would pass (p_fill), and after the commit, what the one-key
 * procedure's answer v (its seven values) leaves in the job and the
 * context. */
RSV_HIDDEN int64_t reserve_proc_fill(rsv_ctx *ctx, const rjob *j);
RSV_HIDDEN void reserve_proc_one_done(rsv_ctx *ctx, rjob *j, const int64_t *v);
/* For a cart batch, whose one CALL runs the cart procedure for many jobs:
 * the key list of a job's CALL (0: the job is not the procedure's), then
 * per key of a committed job its answer, then the job's bookkeeping. */
#define PROC_MAX_LIST 48  /* keys in its list, checked ones included */
/* One key's text, "idx,item,location,units,start,fill;": at most
 * 2 + 20 + 20 + 2 + 20 + 5 digits and 6 marks; each is written into a
 * slot of PROC_KEY_TEXT bytes. */
#define PROC_KEY_TEXT_LONGEST (2 + 20 + 20 + 2 + 20 + 5 + 6)
#define PROC_KEY_TEXT 88
/* The procedure's key list argument, p_keys VARBINARY(4096) in
 * sql/schema.sql. */
#define PROC_LIST_ARG_BYTES 4096
/* The buffer a job's key list is written into. */
#define PROC_CART_LIST_MAX (PROC_MAX_LIST * PROC_KEY_TEXT)
_Static_assert(PROC_KEY_TEXT > PROC_KEY_TEXT_LONGEST,
               "a key's text and its NUL fit its slot");
_Static_assert(PROC_MAX_LIST * PROC_KEY_TEXT_LONGEST <= PROC_LIST_ARG_BYTES,
               "the longest key list fits the procedure's argument");
RSV_HIDDEN size_t reserve_proc_cart_list(rsv_ctx *ctx, rjob *j, char *out,
                                         size_t cap, size_t *taken);
RSV_HIDDEN int reserve_proc_cart_key(rsv_ctx *ctx, rjob *j, int64_t k,
                                     const int64_t *v);
RSV_HIDDEN void reserve_proc_cart_done(rsv_ctx *ctx, rjob *j);

/* reserve.c: the top-ups after a fast commit (PASS_REFILL), and the
 * facts reserve_next() decides on */
RSV_HIDDEN void reserve_refill_ahead(rsv_ctx *ctx, rjob *j);
RSV_HIDDEN void reserve_facts(rsv_ctx *ctx, rjob *j, rend end, rfacts *f);

/* sold_out.c: "out of stock" without the ledger row lock */
RSV_HIDDEN int sold_out_marked(rsv_ctx *ctx, const rjob *j, size_t l);
RSV_HIDDEN int sold_out_unsure(const rjob *j, size_t l);
RSV_HIDDEN int sold_out_read(rsv_ctx *ctx, rjob *j);

/* reserve_next.c: which pass runs next (pure) */
RSV_HIDDEN rpass reserve_next(rstate *st, rpass last, int rc, rend end,
                              const rfacts *f);
RSV_HIDDEN int reserve_ledger_mode(const rjob *j);
RSV_HIDDEN int reserve_refilled_since(const rjob *j);
RSV_HIDDEN int reserve_ledger_fits(const rjob *j);

static inline int pass_end(rjob *j, rend end)
{
    j->end = end;
    return RSV__PASS_ENDED;
}

#endif
