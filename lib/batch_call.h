/*
 * batch_call.h - batch_call.c's functions (the one CALL of each kind)
 * and the batch types they share with batch.c (the public calls, their
 * checks and accounting, and the entries run one by one).  Private to the
 * library, like internal.h.
 */
#ifndef RSV_BATCH_CALL_H
#define RSV_BATCH_CALL_H

#include "reserve_job.h"

/* Where an entry stands. */
enum {
    BE_SEND,  /* goes into the batch statement */
    BE_ALONE, /* run on its own, by the single call, after the batch */
    BE_DONE   /* decided: rc is its code */
};

typedef struct bentry {
    size_t idx;          /* in the caller's arrays */
    uint64_t shop;
    const void *token;
    size_t len;
    uint64_t item, loc;  /* reserves only */
    int64_t qty;
    int state;
    int rc;
    int bad_args;        /* rc is its arguments' (call_check) */
    int answered;        /* the batch procedure answered for it (a cart:
                            the rows it answered) */
    int64_t ans[8];      /* the batch procedure's row for it, idx left out
                            (a cart: ans[0] its status) */
    size_t taken;        /* a cart: the keys its CALL takes units at */
    /* a reserve's job: of the caller's cart, or of this one line at one
     * location */
    rsv_cart cart;
    cart_line line;
    uint64_t line_loc;
    int64_t line_alloc;
    rjob job;
    int have_job;
} bentry;

typedef struct rbatch {
    bentry *e;           /* n entries, in the caller's order */
    size_t n;
    bentry **send;       /* the BE_SEND entries, in lock order */
    size_t nsend;
    int64_t ttl_ms;
    int kind;            /* settle: ST_CLAIMED or ST_RELEASED */
    int call;            /* its entries' kind of call (CALL_*) */
    strbuf json;        /* the CALL's batch argument */
} rbatch;

/* Run the batch statement for b->send: its own transaction
 * (TXN_SELF_COMMIT, retried on conflicts), then each sent entry's ans[]
 * filled.  Returns RSV_OK, RSV__NO_PROC (the procedure cannot be called
 * here: nothing ran, the entries go one by one), or the whole batch's
 * code. */
RSV_HIDDEN int batch_reserve_call(rsv_ctx *ctx, rbatch *b);
RSV_HIDDEN int batch_cart_call(rsv_ctx *ctx, rbatch *b);
RSV_HIDDEN int batch_settle_call(rsv_ctx *ctx, rbatch *b);

#endif
