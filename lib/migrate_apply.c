/*
 * migrate_apply.c - the other store's side of the calls the deciding
 * store answered (the migration handle's thread, and the application's
 * outbox at primary): done one by one or, for runs of shadow work, in
 * batches; and how the two answers are classified and counted.  The
 * handle, its queue and the routing by stage are migrate.c's.
 */
#include <string.h>

#include "migrate.h"
#include "reserve/batch.h"

static int refused(int rc)
{
    return rc == RSV_EOUTOFSTOCK || rc == RSV_ECLAIMED || rc == RSV_EEXPIRED ||
           rc == RSV_ERELEASED;
}

/* An answer the deciding store gave that means it did or did not do the
 * call, as opposed to a failure, after which nothing is known. */
int mig_answered(int rc)
{
    return rc == RSV_OK || refused(rc) || rc == RSV_ENOTFOUND;
}

static int classify(uint32_t op, int old_rc, int new_rc)
{
    if (!mig_answered(old_rc))
        return RSV_MIG_OLD_FAILED;
    if (new_rc == RSV_ENOTFOUND && op != RSV_OP_RESERVE)
        return RSV_MIG_UNKNOWN;
    if (new_rc != RSV_OK && !refused(new_rc))
        return RSV_MIG_NEW_FAILED;
    int old_ok = old_rc == RSV_OK, new_ok = new_rc == RSV_OK;
    if (old_ok && new_ok)
        return RSV_MIG_BOTH_ACCEPTED;
    if (!old_ok && !new_ok)
        return RSV_MIG_BOTH_REFUSED;
    return new_ok ? RSV_MIG_OLD_REFUSED_NEW_ACCEPTED
                  : RSV_MIG_OLD_ACCEPTED_NEW_REFUSED;
}

/* mu held */
void mig_count(rsv_migration *m, uint64_t shop, int stat, uint64_t n)
{
    mig_shop *s = mig_shop_get(&m->shops, shop);
    if (s)
        s->count[stat] += n;
}

int mig_call_new(rsv_ctx *c, const mig_work *w, uint32_t op)
{
    int rc;
    if (op == RSV_OP_RESERVE)
        rc = rsv_reserve_one(c, w->shop, w->token, w->token_len, w->item,
                             w->loc, w->qty, w->ttl_ms);
    else if (op == RSV_OP_CLAIM)
        rc = rsv_claim(c, w->shop, w->token, w->token_len);
    else
        rc = rsv_release(c, w->shop, w->token, w->token_len);
    return rc;
}

int mig_call_old(rsv_migration *m, const mig_work *w, uint32_t op)
{
    rsv_legacy_fn fn;
    void *user;
    pthread_mutex_lock(&m->mu);
    fn = m->legacy;
    user = m->legacy_user;
    pthread_mutex_unlock(&m->mu);
    if (!fn)
        return RSV_EINVAL;
    int is_res = op == RSV_OP_RESERVE;
    return fn(user, op, w->shop, w->token, w->token_len, is_res ? w->item : 0,
              is_res ? w->loc : 0, is_res ? w->qty : 0,
              is_res ? w->ttl_ms : 0);
}

/* mu held.  Made when absent, so that a shop's work is counted even
 * before its stage was read. */
void mig_mark_compare(rsv_migration *m, uint64_t shop)
{
    mig_shop *s = mig_shop_get(&m->shops, shop);
    if (s)
        s->mark_compare = 1;
}

/* mu held.  The shop's work not yet done, by the stage it was offered
 * at: what stage_settled waits for at a flip. */
void mig_pending_add(rsv_migration *m, const mig_work *w, int up)
{
    mig_shop *s = mig_shop_get(&m->shops, w->shop);
    if (!s)
        return;
    uint32_t *p = w->stage == RSV_STAGE_SHADOW ? &s->pending_shadow
                                               : &s->pending_mirror;
    if (up)
        (*p)++;
    else if (*p)
        (*p)--;
}

/* Primary: the old store accepted a reserve libreserve refused.  Its
 * hold is given back (a release on the old store), or its stock drifts
 * from libreserve's and going back to shadow would sell less. */
int mig_old_needs_undo(const mig_work *w, int old_rc)
{
    return w->op == RSV_OP_RESERVE && old_rc == RSV_OK && w->answer != RSV_OK;
}

/* mu held.  One work item done, by the handle's thread or the
 * application: both stores' answers classified and counted. */
void mig_record(rsv_migration *m, const mig_work *w, int old_rc,
                   int new_rc)
{
    int cls = classify(w->op, old_rc, new_rc);
    mig_count(m, w->shop, cls, 1);
    mig_count(m, w->shop, RSV_MIG_APPLIED, 1);
    mig_pending_add(m, w, 0);
    pthread_cond_broadcast(&m->idle_cv);
    /* the old store missed a change it must keep while primary */
    if (cls == RSV_MIG_OLD_FAILED && w->stage == RSV_STAGE_PRIMARY)
        mig_mark_compare(m, w->shop);
    if (cls != RSV_MIG_BOTH_ACCEPTED && cls != RSV_MIG_BOTH_REFUSED &&
        m->n_samples < MIG_SAMPLES) {
        mig_sample *x = &m->samples[m->n_samples++];
        x->shop = w->shop;
        x->w = *w;
        x->class_ = cls;
        x->old_code = old_rc;
        x->new_code = new_rc;
    }
}

/* libreserve's side of a shadow call: through the batcher bt when one is
 * set, else on the handle's own connection. */
static int call_shadow(rsv_migration *m, rsv_batcher *bt, const mig_work *w,
                       uint32_t op)
{
    if (!bt)
        return mig_call_new(m->wctx, w, op);
    if (op == RSV_OP_RESERVE)
        return rsv_batcher_reserve_one(bt, w->shop, w->token, w->token_len,
                                       w->item, w->loc, w->qty, w->ttl_ms);
    if (op == RSV_OP_CLAIM)
        return rsv_batcher_claim(bt, w->shop, w->token, w->token_len);
    return rsv_batcher_release(bt, w->shop, w->token, w->token_len);
}

/* One work item on the handle's thread: the other store's side of a call
 * the deciding store answered. */
static void apply_one(rsv_migration *m, const mig_work *w, rsv_batcher *bt)
{
    int old_rc, new_rc, undo_failed = 0;
    if (w->stage == RSV_STAGE_SHADOW && w->op != RSV_OP_RESERVE &&
        w->answer != RSV_OK) {
        /* The old store refused a claim or release: doing it on
         * libreserve could not be undone, so its answer is read instead
         * (a checkout still held would have been accepted). */
        old_rc = w->answer;
        int32_t st = 0;
        new_rc = rsv_checkout_status(m->wctx, w->shop, w->token, w->token_len,
                                     &st, NULL, NULL);
        if (new_rc == RSV_OK)
            new_rc = st == RSV_STATUS_HELD ? RSV_OK
                     : st == RSV_STATUS_CLAIMED ? RSV_ECLAIMED
                     : st == RSV_STATUS_RELEASED ? RSV_ERELEASED
                                                 : RSV_EEXPIRED;
        if (new_rc == RSV_ECONN || new_rc == RSV_EINDOUBT)
            (void)rsv_reconnect(m->wctx);
    } else if (w->stage == RSV_STAGE_SHADOW) {
        old_rc = w->answer;
        new_rc = call_shadow(m, bt, w, w->op);
        /* libreserve holds what the old store refused: give it back, or
         * its stock drifts from the old store's and every later call
         * compares wrong */
        if (w->op == RSV_OP_RESERVE && new_rc == RSV_OK && old_rc != RSV_OK &&
            call_shadow(m, bt, w, RSV_OP_RELEASE) != RSV_OK)
            undo_failed = 1;
        /* (a batcher reconnects its own connections) */
        if (!bt && rc_needs_reconnect(new_rc))
            (void)rsv_reconnect(m->wctx);
    } else {
        new_rc = w->answer;
        old_rc = mig_call_old(m, w, w->op);
        if (mig_old_needs_undo(w, old_rc) &&
            mig_call_old(m, w, RSV_OP_RELEASE) != RSV_OK)
            undo_failed = 1;
    }
    pthread_mutex_lock(&m->mu);
    mig_record(m, w, old_rc, new_rc);
    /* a store keeps a hold the deciding store refused: its stock drifts
     * until a compare finds it (or the hold expires) */
    if (undo_failed)
        mig_mark_compare(m, w->shop);
    pthread_mutex_unlock(&m->mu);
}

/* What a shadow work item is in a batch: a reserve, or a claim or release
 * the old store accepted (a refused one is read, not made: apply_one). */
enum { KIND_NONE, KIND_RESERVE, KIND_CLAIM, KIND_RELEASE };

static int kind_of(const mig_work *w)
{
    if (w->stage != RSV_STAGE_SHADOW || w->undo)
        return KIND_NONE;
    if (w->op == RSV_OP_RESERVE)
        return KIND_RESERVE;
    if (w->answer != RSV_OK)
        return KIND_NONE;
    return w->op == RSV_OP_CLAIM ? KIND_CLAIM : KIND_RELEASE;
}

static int same_token(const mig_work *a, const mig_work *b)
{
    return a->shop == b->shop && a->token_len == b->token_len &&
           memcmp(a->token, b->token, a->token_len) == 0;
}

static int same_key(const mig_work *a, const mig_work *b)
{
    return a->shop == b->shop && a->item == b->item && a->loc == b->loc;
}

/* Why these may share a batch: each batch call answers every entry as its
 * own call would (reserve/batch.h), and a batch runs its reserves, then
 * its claims, then its releases (the KIND_ order), so an item may join
 * when that order gives every item the answer it gets in queue order.  A
 * claim's answer depends on its own checkout alone and takes no units
 * from the pool, so claims commute with everything of other checkouts; a
 * release gives units back, so it never shares a batch with a reserve;
 * and a checkout's items must already stand in that order (a reserve then
 * its claim may share a batch, a claim then a reserve of the same
 * checkout may not), each kind at most once.  A batch decides the
 * reserves of one key in queue order but may run a reserve its pool
 * could not serve after the later ones: with equal quantities a short
 * pool is short for all of them, with different ones a larger reserve
 * could lose its units to a smaller later one, so those never share. */
int mig_batch_joins(const mig_work *b, size_t n, const mig_work *w)
{
    int k = kind_of(w);
    if (n >= MIG_BATCH || k == KIND_NONE)
        return 0;
    for (size_t i = 0; i < n; i++) {
        int ki = kind_of(&b[i]);
        if (ki == KIND_NONE || (same_token(&b[i], w) && ki >= k))
            return 0;
        if ((k == KIND_RESERVE && ki == KIND_RELEASE) ||
            (k == KIND_RELEASE && ki == KIND_RESERVE))
            return 0;
        if (k == KIND_RESERVE && ki == KIND_RESERVE &&
            (b[i].ttl_ms != w->ttl_ms || (same_key(&b[i], w) &&
                                          b[i].qty != w->qty)))
            return 0;
    }
    return 1;
}

/* A reserve the old store refused: libreserve gives back what it held for
 * it (apply_one), and the reserves after it must find those units, so it
 * is the last of its batch. */
int mig_batch_ends(const mig_work *w)
{
    return kind_of(w) == KIND_RESERVE && w->answer != RSV_OK;
}

/* The entries of kind k in one batch call on the handle's context. */
static void run_kind(rsv_migration *m, const mig_work *b, size_t n, int k,
                     int *new_rc)
{
    uint64_t shops[MIG_BATCH], items[MIG_BATCH], locs[MIG_BATCH];
    int64_t qtys[MIG_BATCH];
    const void *toks[MIG_BATCH];
    size_t lens[MIG_BATCH], at[MIG_BATCH], c = 0;
    int res[MIG_BATCH];
    int64_t ttl = 0;
    for (size_t i = 0; i < n; i++) {
        if (kind_of(&b[i]) != k)
            continue;
        shops[c] = b[i].shop;
        toks[c] = b[i].token;
        lens[c] = b[i].token_len;
        items[c] = b[i].item;
        locs[c] = b[i].loc;
        qtys[c] = b[i].qty;
        ttl = b[i].ttl_ms;
        at[c++] = i;
    }
    if (c == 0)
        return;
    if (k == KIND_RESERVE)
        (void)rsv_reserve_batch(m->wctx, c, shops, toks, lens, items, locs,
                                qtys, ttl, res);
    else if (k == KIND_CLAIM)
        (void)rsv_claim_batch(m->wctx, c, shops, toks, lens, res);
    else
        (void)rsv_release_batch(m->wctx, c, shops, toks, lens, res);
    int gone = 0;
    for (size_t j = 0; j < c; j++) {
        new_rc[at[j]] = res[j];
        gone |= rc_needs_reconnect(res[j]);
    }
    if (gone)
        (void)rsv_reconnect(m->wctx);
}

/* n shadow work items that mig_batch_joins let share a batch: a batch
 * call per kind, one COMMIT each instead of one per item, then every item
 * recorded as apply_one would record it. */
static void apply_batch(rsv_migration *m, const mig_work *b, size_t n)
{
    int new_rc[MIG_BATCH];
    run_kind(m, b, n, KIND_RESERVE, new_rc);
    run_kind(m, b, n, KIND_CLAIM, new_rc);
    run_kind(m, b, n, KIND_RELEASE, new_rc);
    const mig_work *last = &b[n - 1];
    int undo_failed = mig_batch_ends(last) && new_rc[n - 1] == RSV_OK &&
                      rsv_release(m->wctx, last->shop, last->token,
                                  last->token_len) != RSV_OK;
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < n; i++)
        mig_record(m, &b[i], b[i].answer, new_rc[i]);
    if (undo_failed)
        mig_mark_compare(m, last->shop);
    pthread_mutex_unlock(&m->mu);
}

void mig_apply(rsv_migration *m, const mig_work *b, size_t n,
               rsv_batcher *bt)
{
    if (n == 1)
        apply_one(m, b, bt);
    else if (n > 1)
        apply_batch(m, b, n);
}
