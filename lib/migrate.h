/*
 * migrate.h - what the two files of the migration handle share
 * (include/reserve/migrate.h is its public side): the handle, the shops
 * it knows (stage and counters), its queue and outbox, and the statements
 * on the migration tables that migrate_stage.c runs for migrate.c.
 */
#ifndef RSV_MIGRATE_INTERNAL_H
#define RSV_MIGRATE_INTERNAL_H

#include <pthread.h>

#include "internal.h"
#include "reserve/migrate.h"

/* The ring of mismatch samples per shop in rsv_migration_mismatch. */
#define MIG_SLOTS 256
/* Samples waiting to be written, per handle: more in one interval are
 * counted but not sampled. */
#define MIG_SAMPLES 64
#define MIG_QUEUE_DEFAULT 4096
/* Shadow work done by one batch call: one COMMIT on libreserve's server
 * for up to this many of the buyers' calls. */
#define MIG_BATCH 64
/* How long the handle's thread waits for more shadow work to join a
 * batch when fewer are queued: the shadow side runs off the request
 * path, so its lag may grow by this to save the server commits. */
#define MIG_LINGER_MS 10

typedef struct mig_shop {
    uint64_t shop;
    int used;
    int32_t stage;
    uint64_t count[RSV_MIG_STAT_COUNT];
    uint64_t flushed[RSV_MIG_STAT_COUNT]; /* already added to
                                             rsv_migration_counts */
    int mark_compare;                     /* work dropped: set
                                             needs_compare */
    /* queued work not yet done, by the stage it was queued at: the
     * store that decides now must first have seen what the other one
     * decided before (dispatch waits for it) */
    uint32_t pending_shadow, pending_mirror;
    uint32_t next_slot;
} mig_shop;

/* shop -> mig_shop, open addressing (never shrinks: shops are few). */
typedef struct mig_map {
    mig_shop *v;
    size_t cap, n;
} mig_map;

/* One call waiting for the handle's thread: the deciding store's answer
 * and the stage it was made at. */
typedef struct mig_work {
    uint32_t op;
    int32_t stage;
    int answer;
    int undo; /* the release that gives back an old store's hold the
                 deciding store refused: part of its reserve's work, not
                 offered or counted on its own */
    uint64_t shop, item, loc;
    int64_t qty, ttl_ms;
    unsigned char token[RSV_TOKEN_MAX];
    size_t token_len;
} mig_work;

/* A ring of work, bounded when the handle opens. */
typedef struct mig_ring {
    mig_work *v;
    size_t max, head, n;
} mig_ring;

/* Outbox work handed to the application (rsv_migrate_mirror_next) and
 * not yet done (rsv_migrate_mirror_done); id 0: a free slot. */
typedef struct mig_ticket {
    uint64_t id;
    mig_work w;
} mig_ticket;

typedef struct mig_sample {
    uint64_t shop;
    mig_work w;
    int class_, old_code, new_code;
} mig_sample;

struct rsv_migration {
    rsv_ctx *ctx;       /* the application's: primary and complete */
    rsv_ctx *wctx;      /* the handle's thread's own */
    rsv_legacy_fn legacy;
    void *legacy_user;
    rsv_batcher *batcher;   /* the application's, for shadow calls */

    pthread_mutex_t mu;
    pthread_cond_t cv;      /* work arrived, or quit */
    pthread_cond_t idle_cv; /* a work item was done */
    pthread_cond_t ob_cv;   /* the outbox got work, or quit */
    pthread_t thread;
    int has_thread;
    /* under mu: */
    int quit;
    size_t busy;            /* work items in the thread's hands */
    uint32_t refresh_ms;
    mig_map shops;
    uint64_t stage_version; /* the highest version read */
    uint64_t read_failed;
    mig_ring q;             /* for the handle's thread */
    /* Primary's work when no old store's function is registered: the
     * application does it (rsv_migrate_mirror_next/_done) */
    mig_ring ob;
    mig_ticket *hand;       /* q.max slots: handed out, not done */
    size_t hand_n;
    uint64_t next_ticket;
    int ob_waiters;         /* threads inside rsv_migrate_mirror_next:
                               close waits for them to leave */
    mig_work batch[MIG_BATCH]; /* the thread's work in hand */
    mig_sample samples[MIG_SAMPLES];
    size_t n_samples;
    uint32_t slot_base;
};

/* ---- migrate_apply.c ---- */
/* The deciding store's answer means it did or did not do the call (a
 * failure means nothing is known). */
RSV_HIDDEN int mig_answered(int rc);
/* Count n under the shop's counter stat. mu held. */
RSV_HIDDEN void mig_count(rsv_migration *m, uint64_t shop, int stat,
                          uint64_t n);
/* The work item's call on context c, as op. */
RSV_HIDDEN int mig_call_new(rsv_ctx *c, const mig_work *w, uint32_t op);
/* The work item's call on the old store's function, as op. */
RSV_HIDDEN int mig_call_old(rsv_migration *m, const mig_work *w, uint32_t op);
/* Mark the shop for a compare (made when absent). mu held. */
RSV_HIDDEN void mig_mark_compare(rsv_migration *m, uint64_t shop);
/* The shop's work not yet done, up (1) or down (0). mu held. */
RSV_HIDDEN void mig_pending_add(rsv_migration *m, const mig_work *w, int up);
/* Primary: the old store accepted a reserve libreserve refused. */
RSV_HIDDEN int mig_old_needs_undo(const mig_work *w, int old_rc);
/* One item done: both answers classified and counted. mu held. */
RSV_HIDDEN void mig_record(rsv_migration *m, const mig_work *w, int old_rc,
                           int new_rc);
/* Whether w may join the batch b[0..n) (n >= 1), and whether a batch
 * must end after w. */
RSV_HIDDEN int mig_batch_joins(const mig_work *b, size_t n,
                               const mig_work *w);
RSV_HIDDEN int mig_batch_ends(const mig_work *w);
/* Do the n items of b on the handle's thread (mu not held): one by one,
 * or n > 1 shadow items mig_batch_joins let in as one batch; with bt (the
 * batcher set when they were taken), one item through it. */
RSV_HIDDEN void mig_apply(rsv_migration *m, const mig_work *b, size_t n,
                          rsv_batcher *bt);

/* ---- migrate_stage.c ---- */
/* The shop's entry, made (stage 0) when absent; NULL when out of memory.
 * mu held. */
RSV_HIDDEN mig_shop *mig_shop_get(mig_map *map, uint64_t shop);
/* The shop's entry or NULL. mu held. */
RSV_HIDDEN mig_shop *mig_shop_find(const mig_map *map, uint64_t shop);
RSV_HIDDEN void mig_map_free(mig_map *map);
/* Read the stage rows changed since the last read (one statement on the
 * handle's connection; mu not held) into the map.  RSV_OK, RSV_ESCHEMA
 * (no table), or the failure (message in wctx). */
RSV_HIDDEN int mig_stage_read(rsv_migration *m);
/* Add the counters counted since the last flush to rsv_migration_counts,
 * write the samples waiting and mark the shops whose work was dropped
 * (mu not held).  Best effort: what fails is tried again next time. */
RSV_HIDDEN void mig_flush(rsv_migration *m);

#endif /* RSV_MIGRATE_INTERNAL_H */
