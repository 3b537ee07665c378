/*
 * check_batch.c - rsv_reserve_batch, rsv_claim_batch, rsv_release_batch:
 * every entry answered as its single call would answer it, nothing
 * oversold, repeats idempotent, the limits, batches racing on one hot
 * item, the one-statement path really taken, and a batch of new
 * checkouts of distinct keys taken as one set.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <reserve/batch.h>
#include <reserve/stats.h>

#include "testutil.h"
#include "../lib/test_flags.h"

#define TOK(s) (s), strlen(s)

/* A batch of up to RSV_BATCH_MAX entries, built up one by one. */
typedef struct tbatch {
    size_t n;
    uint64_t shop[RSV_BATCH_MAX], item[RSV_BATCH_MAX], loc[RSV_BATCH_MAX];
    const void *tok[RSV_BATCH_MAX];
    size_t len[RSV_BATCH_MAX];
    int64_t qty[RSV_BATCH_MAX];
    char buf[RSV_BATCH_MAX][32];
    int res[RSV_BATCH_MAX];
} tbatch;

static void add(tbatch *b, uint64_t shop, const char *tok, uint64_t item,
                uint64_t loc, int64_t qty)
{
    size_t i = b->n++;
    b->shop[i] = shop;
    b->item[i] = item;
    b->loc[i] = loc;
    b->qty[i] = qty;
    if (tok) {
        snprintf(b->buf[i], sizeof b->buf[i], "%s", tok);
        b->tok[i] = b->buf[i];
        b->len[i] = strlen(tok);
    } else {
        b->tok[i] = NULL;
        b->len[i] = 1;
    }
}

static int reserve(rsv_ctx *ctx, tbatch *b)
{
    return rsv_reserve_batch(ctx, b->n, b->shop, b->tok, b->len, b->item,
                             b->loc, b->qty, 0, b->res);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static uint64_t stat(rsv_ctx *ctx, uint32_t s)
{
    uint64_t v = 0;
    ck_assert_int_eq(rsv_stats_get(ctx, s, RSV_OP_RESERVE, &v), RSV_OK);
    return v;
}

/* The same stock in a fresh shop: items 1 (10 units, free ledger row), 2
 * (1 unit), 3 (4 units, all pooled); a held and a claimed checkout. */
static void fixture(rsv_ctx *ctx, uint64_t shop)
{
    TU_OK(ctx, rsv_stock_set(ctx, shop, 1, 1, 10));
    TU_OK(ctx, rsv_stock_set(ctx, shop, 2, 1, 1));
    TU_OK(ctx, rsv_stock_set(ctx, shop, 3, 1, 4));
    TU_OK(ctx, rsv_replenish(ctx, shop, 3, 1, NULL));
    TU_OK(ctx, rsv_reserve_one(ctx, shop, TOK("held"), 1, 1, 1, 0));
    TU_OK(ctx, rsv_reserve_one(ctx, shop, TOK("claimed"), 1, 1, 1, 0));
    TU_OK(ctx, rsv_claim(ctx, shop, TOK("claimed")));
}

/* The mixed batch: new at a free ledger row, new from a pool, the last
 * unit and one too many, a re-reserve, a claimed checkout, a bad token,
 * a NULL token, a bad quantity, an unknown item, a token listed twice. */
static void mixed(tbatch *b, uint64_t shop)
{
    memset(b, 0, sizeof *b);
    add(b, shop, "new-a", 1, 1, 2);
    add(b, shop, "new-b", 3, 1, 3);
    add(b, shop, "last", 2, 1, 1);
    add(b, shop, "too-late", 2, 1, 1);
    add(b, shop, "held", 1, 1, 2);
    add(b, shop, "claimed", 1, 1, 1);
    add(b, shop, "", 1, 1, 1);
    add(b, shop, NULL, 1, 1, 1);
    add(b, shop, "zero", 1, 1, 0);
    add(b, shop, "ghost", 99, 1, 1);
    add(b, shop, "new-a", 3, 1, 1);
    add(b, shop, "new-c", 1, 1, 1);
}

START_TEST(outcomes_match_single_calls)
{
    tu_fix f;
    tu_fix_open(&f, 0, 0);
    uint64_t bshop = f.shop, sshop = tu_shop();
    fixture(f.ctx, bshop);
    fixture(f.ctx, sshop);
    static tbatch b, s;
    mixed(&b, bshop);
    TU_OK(f.ctx, reserve(f.ctx, &b));
    mixed(&s, sshop);
    for (size_t i = 0; i < s.n; i++)
        s.res[i] = rsv_reserve_one(f.ctx, sshop, s.tok[i], s.len[i], s.item[i],
                                   s.loc[i], s.qty[i], 0);
    for (size_t i = 0; i < b.n; i++)
        ck_assert_msg(b.res[i] == s.res[i], "entry %zu: batch %s, single %s",
                      i, rsv_code_name(b.res[i]), rsv_code_name(s.res[i]));
    ck_assert_int_eq(b.res[0], RSV_OK);
    ck_assert_int_eq(b.res[3], RSV_EOUTOFSTOCK);
    ck_assert_int_eq(b.res[5], RSV_ECLAIMED);
    ck_assert_int_eq(b.res[6], RSV_ETOKEN);
    ck_assert_int_eq(b.res[7], RSV_EINVAL);
    ck_assert_int_eq(b.res[8], RSV_EQUANTITY);
    ck_assert_int_eq(b.res[9], RSV_ENOITEM);
    for (uint64_t item = 1; item <= 3; item++)
        ck_assert_int_eq(tu_held(f.ctx, bshop, item, 1),
                         tu_held(f.ctx, sshop, item, 1));
    int32_t st = 0;
    int64_t units = 0;
    TU_OK(f.ctx, rsv_checkout_status(f.ctx, bshop, TOK("new-a"), &st, &units,
                                     NULL));
    ck_assert_int_eq(units, 1); /* the second entry re-reserved it */
    TU_OK(f.ctx, rsv_checkout_status(f.ctx, bshop, TOK("held"), &st, &units,
                                     NULL));
    ck_assert_int_eq(units, 2);
    tu_fix_close(&f);
}
END_TEST

START_TEST(repeat_is_idempotent)
{
    tu_fix f;
    tu_fix_open(&f, 0, 0);
    tu_fix_stock(&f, 1, 1, 20);
    tu_fix_stock(&f, 2, 1, 20);
    static tbatch b;
    memset(&b, 0, sizeof b);
    add(&b, f.shop, "r1", 2, 1, 2);
    add(&b, f.shop, "r2", 1, 1, 3);
    add(&b, f.shop, "r3", 1, 1, 1);
    add(&b, f.shop, "r4", 2, 1, 4);
    for (int round = 0; round < 3; round++) {
        TU_OK(f.ctx, reserve(f.ctx, &b));
        for (size_t i = 0; i < b.n; i++)
            ck_assert_int_eq(b.res[i], RSV_OK);
        ck_assert_int_eq(tu_held(f.ctx, f.shop, 1, 1), 4);
        ck_assert_int_eq(tu_held(f.ctx, f.shop, 2, 1), 6);
    }
    tu_fix_close(&f);
}
END_TEST

static void settle_fixture(rsv_ctx *ctx, uint64_t shop)
{
    TU_OK(ctx, rsv_stock_set(ctx, shop, 1, 1, 50));
    const char *toks[] = {"a", "b", "c", "d"};
    for (int i = 0; i < 4; i++)
        TU_OK(ctx, rsv_reserve_one(ctx, shop, TOK(toks[i]), 1, 1, 2, 0));
    TU_OK(ctx, rsv_reserve_one(ctx, shop, TOK("e"), 1, 1, 2, 1));
    TU_OK(ctx, rsv_claim(ctx, shop, TOK("c")));
    TU_OK(ctx, rsv_release(ctx, shop, TOK("d")));
    sleep_ms(20);
    TU_OK(ctx, rsv_sweep(ctx, shop, 0, NULL)); /* e's hold given back */
}

static void settle_list(tbatch *b, uint64_t shop)
{
    memset(b, 0, sizeof *b);
    const char *toks[] = {"a", "b", "c", "d", "e", "nobody", "a", ""};
    for (int i = 0; i < 8; i++)
        add(b, shop, toks[i], 0, 0, 0);
    add(b, shop, NULL, 0, 0, 0);
}

START_TEST(claims_and_releases_match_single_calls)
{
    tu_fix f;
    tu_fix_open(&f, 0, 0);
    for (int release = 0; release < 2; release++) {
        uint64_t bshop = tu_shop(), sshop = tu_shop();
        settle_fixture(f.ctx, bshop);
        settle_fixture(f.ctx, sshop);
        static tbatch b, s;
        settle_list(&b, bshop);
        settle_list(&s, sshop);
        int rc = release ? rsv_release_batch(f.ctx, b.n, b.shop, b.tok, b.len,
                                             b.res)
                         : rsv_claim_batch(f.ctx, b.n, b.shop, b.tok, b.len,
                                           b.res);
        TU_OK(f.ctx, rc);
        for (size_t i = 0; i < s.n; i++)
            s.res[i] = release ? rsv_release(f.ctx, sshop, s.tok[i], s.len[i])
                               : rsv_claim(f.ctx, sshop, s.tok[i], s.len[i]);
        for (size_t i = 0; i < b.n; i++)
            ck_assert_msg(b.res[i] == s.res[i], "%s entry %zu: batch %s, "
                          "single %s", release ? "release" : "claim", i,
                          rsv_code_name(b.res[i]), rsv_code_name(s.res[i]));
        ck_assert_int_eq(b.res[2], release ? RSV_ECLAIMED : RSV_ECLAIMED);
        ck_assert_int_eq(b.res[5], RSV_ENOTFOUND);
        ck_assert_int_eq(b.res[7], RSV_ETOKEN);
        if (!release) {
            ck_assert_int_eq(b.res[0], RSV_OK);
            ck_assert_int_eq(b.res[3], RSV_ERELEASED);
            ck_assert_int_eq(b.res[4], RSV_EEXPIRED);
            ck_assert_int_eq(b.res[6], RSV_ECLAIMED); /* listed twice */
        }
        ck_assert_int_eq(tu_held(f.ctx, bshop, 1, 1),
                         tu_held(f.ctx, sshop, 1, 1));
        ck_assert_int_eq(tu_on_hand(f.ctx, bshop, 1, 1),
                         tu_on_hand(f.ctx, sshop, 1, 1));
        /* and again: idempotent */
        rc = release ? rsv_release_batch(f.ctx, b.n, b.shop, b.tok, b.len,
                                         b.res)
                     : rsv_claim_batch(f.ctx, b.n, b.shop, b.tok, b.len,
                                       b.res);
        TU_OK(f.ctx, rc);
        ck_assert_int_eq(b.res[0], release ? RSV_OK : RSV_ECLAIMED);
        ck_assert_int_eq(tu_on_hand(f.ctx, bshop, 1, 1),
                         tu_on_hand(f.ctx, sshop, 1, 1));
    }
    tu_fix_close(&f);
}
END_TEST

START_TEST(one_and_the_most)
{
    tu_fix f;
    tu_fix_open(&f, 0, 0);
    tu_fix_stock(&f, 1, 1, 200);
    static tbatch b;
    memset(&b, 0, sizeof b);
    add(&b, f.shop, "one", 1, 1, 1);
    TU_OK(f.ctx, reserve(f.ctx, &b));
    ck_assert_int_eq(b.res[0], RSV_OK);
    memset(&b, 0, sizeof b);
    char tok[32];
    for (int i = 0; i < RSV_BATCH_MAX; i++) {
        snprintf(tok, sizeof tok, "max-%d", i);
        add(&b, f.shop, tok, 1, 1, 1);
    }
    TU_OK(f.ctx, reserve(f.ctx, &b));
    int ok = 0;
    for (int i = 0; i < RSV_BATCH_MAX; i++) {
        ck_assert(b.res[i] == RSV_OK || b.res[i] == RSV_EOUTOFSTOCK);
        ok += b.res[i] == RSV_OK;
    }
    ck_assert_int_eq(ok, 199);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 1, 1), 200);
    /* and the claims of all of them */
    TU_OK(f.ctx, rsv_claim_batch(f.ctx, b.n, b.shop, b.tok, b.len, b.res));
    ok = 0;
    for (int i = 0; i < RSV_BATCH_MAX; i++)
        ok += b.res[i] == RSV_OK;
    ck_assert_int_eq(ok, 199);
    /* one too many: refused as a whole */
    int res[RSV_BATCH_MAX + 1];
    uint64_t shops[RSV_BATCH_MAX + 1] = {0};
    const void *toks[RSV_BATCH_MAX + 1];
    size_t lens[RSV_BATCH_MAX + 1];
    for (int i = 0; i <= RSV_BATCH_MAX; i++) {
        toks[i] = "x";
        lens[i] = 1;
    }
    int rc = rsv_claim_batch(f.ctx, RSV_BATCH_MAX + 1, shops, toks, lens, res);
    TU_RC(f.ctx, rc, RSV_EINVAL);
    ck_assert_int_eq(res[RSV_BATCH_MAX], RSV_EINVAL);
    rc = rsv_claim_batch(f.ctx, 0, shops, toks, lens, res);
    TU_RC(f.ctx, rc, RSV_EINVAL);
    rc = rsv_claim_batch(f.ctx, 1, shops, NULL, lens, res);
    TU_RC(f.ctx, rc, RSV_EINVAL);
    ck_assert_int_eq(res[0], RSV_EINVAL);
    rc = rsv_reserve_batch(f.ctx, 1, b.shop, b.tok, b.len, b.item, NULL, b.qty,
                           0, res);
    TU_RC(f.ctx, rc, RSV_EINVAL);
    rc = rsv_reserve_batch(f.ctx, 1, b.shop, b.tok, b.len, b.item, b.loc,
                           b.qty, -1, res);
    TU_RC(f.ctx, rc, RSV_EQUANTITY);
    ck_assert_int_eq(rsv_reserve_batch(NULL, 1, b.shop, b.tok, b.len, b.item,
                                       b.loc, b.qty, 0, res), RSV_EINVAL);
    tu_fix_close(&f);
}
END_TEST

START_TEST(refused_as_a_whole)
{
    tu_fix f;
    tu_fix_open(&f, 0, 0);
    tu_fix_stock(&f, 1, 1, 20);
    static tbatch b;
    memset(&b, 0, sizeof b);
    add(&b, f.shop, "w1", 1, 1, 1);
    add(&b, f.shop, "w2", 1, 1, 1);
    tu_exec(f.conn, "START TRANSACTION");
    int rc = reserve(f.ctx, &b);
    TU_RC(f.ctx, rc, RSV_EINTXN);
    ck_assert_int_eq(b.res[1], RSV_EINTXN);
    rc = rsv_claim_batch(f.ctx, b.n, b.shop, b.tok, b.len, b.res);
    TU_RC(f.ctx, rc, RSV_EINTXN);
    tu_exec(f.conn, "ROLLBACK");
    TU_OK(f.ctx, rsv_set_enabled(f.ctx, 0));
    rc = reserve(f.ctx, &b);
    TU_RC(f.ctx, rc, RSV_EDISABLED);
    ck_assert_int_eq(b.res[0], RSV_EDISABLED);
    TU_OK(f.ctx, rsv_set_enabled(f.ctx, 1));
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 1, 1), 0);
    TU_OK(f.ctx, reserve(f.ctx, &b));
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 1, 1), 2);
    tu_fix_close(&f);
}
END_TEST

/* One statement for the whole batch: the CALL is the only statement
 * (no top-up is due: the units come from the free ledger row). */
START_TEST(one_statement_per_batch)
{
    tu_fix f;
    tu_fix_open(&f, RSV_OPT_NO_PROACTIVE_REFILL, 0);
    tu_fix_stock(&f, 1, 1, 100);
    tu_fix_stock(&f, 2, 1, 100);
    static tbatch b;
    memset(&b, 0, sizeof b);
    char tok[32];
    for (int i = 0; i < 8; i++) {
        snprintf(tok, sizeof tok, "s-%d", i);
        add(&b, f.shop, tok, 1 + (uint64_t)(i % 2), 1, 1 + i % 3);
    }
    /* the context sees both ledger rows once */
    TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK("seen-1"), 1, 1, 1, 0));
    TU_OK(f.ctx, rsv_reserve_one(f.ctx, f.shop, TOK("seen-2"), 2, 1, 1, 0));
    rsv_stats_reset(f.ctx);
    TU_OK(f.ctx, reserve(f.ctx, &b));
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(b.res[i], RSV_OK);
    ck_assert_uint_eq(stat(f.ctx, RSV_STAT_STATEMENTS), 1);
    ck_assert_uint_eq(stat(f.ctx, RSV_STAT_ONE_TRIP), 8);
    ck_assert_uint_eq(stat(f.ctx, RSV_STAT_CALLS), 8);
    ck_assert_uint_eq(stat(f.ctx, RSV_STAT_OK), 8);
    ck_assert_uint_eq(stat(f.ctx, RSV_STAT_LEDGER_TAKES), 8);
    /* without the procedures: the same outcomes, one by one */
    MYSQL *c2;
    rsv_ctx *sctx = tu_open_with(&c2, TEST_OPT_STATEMENTS_ONLY, 0);
    for (int i = 0; i < 8; i++)
        b.buf[i][0] = 't';
    TU_OK(sctx, reserve(sctx, &b));
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(b.res[i], RSV_OK);
    ck_assert_uint_eq(stat(sctx, RSV_STAT_ONE_TRIP), 0);
    ck_assert_uint_eq(stat(sctx, RSV_STAT_CALLS), 8);
    ck_assert_uint_eq(stat(sctx, RSV_STAT_STATEMENTS) > 8, 1);
    uint64_t claims = 0, stmts = 0;
    TU_OK(f.ctx, rsv_stats_reset(f.ctx));
    TU_OK(f.ctx, rsv_claim_batch(f.ctx, b.n, b.shop, b.tok, b.len, b.res));
    TU_OK(f.ctx, rsv_stats_get(f.ctx, RSV_STAT_CALLS, RSV_OP_CLAIM, &claims));
    TU_OK(f.ctx, rsv_stats_get(f.ctx, RSV_STAT_STATEMENTS, RSV_OP_CLAIM,
                               &stmts));
    ck_assert_uint_eq(claims, 8);
    ck_assert_uint_eq(stmts, 1);
    /* what is left: the s- checkouts (15 units) and the two seen- ones */
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 1, 1) +
                         tu_held(f.ctx, f.shop, 2, 1), 17);
    rsv_close(sctx);
    mysql_close(c2);
    tu_fix_close(&f);
}
END_TEST

/* Multi-table UPDATEs this session has run: the batch procedure runs one
 * for a batch of new checkouts of distinct keys (every ledger row at
 * once), none for entries one by one. */
static int64_t multi_updates(MYSQL *c)
{
    return tu_i64(c, "SELECT VARIABLE_VALUE FROM "
                     "information_schema.SESSION_STATUS WHERE "
                     "VARIABLE_NAME = 'COM_UPDATE_MULTI'");
}

static void plain(tbatch *b, uint64_t shop, const char *tok, uint64_t item,
                  int64_t qty)
{
    add(b, shop, tok, item, 1, qty);
}

/* Reserve batch b on ctx (whose session is c): the multi-table UPDATEs
 * it ran. */
static int64_t reserve_sets(rsv_ctx *ctx, MYSQL *c, tbatch *b)
{
    int64_t m0 = multi_updates(c);
    TU_OK(ctx, reserve(ctx, b));
    return multi_updates(c) - m0;
}

/* New checkouts of distinct keys take their ledger rows together, in one
 * statement per table; when one of them cannot (its checkout exists, its
 * key is short, its ledger row is held elsewhere) the set is given back
 * and each entry runs on its own, answering as its single call would.
 * The audit after the test finds a unit taken twice (a set not given
 * back) or a hold without its units. */
START_TEST(distinct_keys_in_one_set)
{
    tu_fix f;
    tu_fix_open(&f, RSV_OPT_NO_PROACTIVE_REFILL, 0);
    for (uint64_t item = 1; item <= 5; item++)
        tu_fix_stock(&f, item, 1, 10);
    tu_fix_stock(&f, 6, 1, 1);
    tu_fix_pooled(&f, 7, 1, 10);
    static tbatch b;

    /* four new checkouts of four keys: one set */
    memset(&b, 0, sizeof b);
    for (uint64_t i = 1; i <= 4; i++) {
        char tok[16];
        snprintf(tok, sizeof tok, "s-%d", (int)i);
        plain(&b, f.shop, tok, i, 1 + (int64_t)(i % 3));
    }
    rsv_stats_reset(f.ctx);
    ck_assert_int_eq(reserve_sets(f.ctx, f.conn, &b), 1);
    for (size_t i = 0; i < b.n; i++) {
        ck_assert_int_eq(b.res[i], RSV_OK);
        ck_assert_int_eq(tu_held(f.ctx, f.shop, b.item[i], 1), b.qty[i]);
    }
    ck_assert_uint_eq(stat(f.ctx, RSV_STAT_ONE_TRIP), 4);
    ck_assert_uint_eq(stat(f.ctx, RSV_STAT_LEDGER_TAKES), 4);
    ck_assert_uint_eq(stat(f.ctx, RSV_STAT_STATEMENTS), 1);

    /* one checkout exists already (s-1, now to item 5): no set */
    memset(&b, 0, sizeof b);
    plain(&b, f.shop, "d-2", 2, 1);
    plain(&b, f.shop, "d-3", 3, 1);
    plain(&b, f.shop, "s-1", 5, 2);
    ck_assert_int_eq(reserve_sets(f.ctx, f.conn, &b), 0);
    for (size_t i = 0; i < b.n; i++)
        ck_assert_int_eq(b.res[i], RSV_OK);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 1, 1), 0);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 2, 1), 4);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 3, 1), 2);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 5, 1), 2);

    /* one key short (item 6 has 1 unit): the set is given back */
    memset(&b, 0, sizeof b);
    plain(&b, f.shop, "e-1", 1, 1);
    plain(&b, f.shop, "e-4", 4, 1);
    plain(&b, f.shop, "e-6", 6, 2);
    ck_assert_int_eq(reserve_sets(f.ctx, f.conn, &b), 1);
    ck_assert_int_eq(b.res[0], RSV_OK);
    ck_assert_int_eq(b.res[1], RSV_OK);
    ck_assert_int_eq(b.res[2], RSV_EOUTOFSTOCK);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 1, 1), 1);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 4, 1), 3);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 6, 1), 0);
    tu_audit_clean(); /* items 1 and 4 issued once each */

    /* item 7's ledger row held by another session: the set is given back
     * and item 7's units come from its pool (a fresh context, so that no
     * pool cursor keeps its entry out of the set) */
    MYSQL *c2;
    rsv_ctx *ctx2 = tu_open_with(&c2, RSV_OPT_NO_PROACTIVE_REFILL, 0);
    MYSQL *adm = tu_fix_admin(&f);
    char q[160];
    snprintf(q, sizeof q, "UPDATE rsv_ledger SET updated_at = NOW(6) "
                          "WHERE shop_id = %llu AND item_id = 7",
             (unsigned long long)f.shop);
    tu_exec(adm, "BEGIN");
    tu_exec(adm, q);
    memset(&b, 0, sizeof b);
    plain(&b, f.shop, "l-2", 2, 1);
    plain(&b, f.shop, "l-5", 5, 1);
    plain(&b, f.shop, "l-7", 7, 2);
    ck_assert_int_eq(reserve_sets(ctx2, c2, &b), 1);
    tu_exec(adm, "ROLLBACK");
    for (size_t i = 0; i < b.n; i++)
        ck_assert_int_eq(b.res[i], RSV_OK);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 2, 1), 5);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 5, 1), 3);
    ck_assert_int_eq(tu_held(f.ctx, f.shop, 7, 1), 2);
    rsv_close(ctx2);
    mysql_close(c2);
    tu_fix_close(&f);
}
END_TEST

/* Batches of 8 from 8 threads on one hot item: exactly its stock held. */
#define HOT_THREADS 8
#define HOT_ROUNDS 6
#define HOT_STOCK 150
static uint64_t hot_shop;
static int hot_ok[HOT_THREADS];

static void *hot_buyer(void *arg)
{
    int t = (int)(intptr_t)arg;
    MYSQL *c = tu_connect();
    rsv_options o;
    rsv_options_init(&o, RSV_OPTIONS_VERSION);
    o.pool_cap = 20;
    o.max_retries = 50;
    rsv_ctx *ctx = NULL;
    if (rsv_open(&ctx, c, &o) != RSV_OK)
        return NULL;
    static __thread tbatch b;
    for (int r = 0; r < HOT_ROUNDS; r++) {
        memset(&b, 0, sizeof b);
        char tok[32];
        for (int i = 0; i < 8; i++) {
            snprintf(tok, sizeof tok, "h%d-%d-%d", t, r, i);
            add(&b, hot_shop, tok, 1, 1, 1 + i % 2);
        }
        if (reserve(ctx, &b) != RSV_OK)
            continue;
        for (int i = 0; i < 8; i++)
            if (b.res[i] == RSV_OK)
                hot_ok[t] += (int)b.qty[i];
    }
    rsv_close(ctx);
    mysql_close(c);
    return NULL;
}

START_TEST(hot_item_never_oversold)
{
    tu_fix f;
    tu_fix_open(&f, 0, 0);
    hot_shop = f.shop;
    tu_fix_stock(&f, 1, 1, HOT_STOCK);
    pthread_t th[HOT_THREADS];
    for (int t = 0; t < HOT_THREADS; t++) {
        hot_ok[t] = 0;
        pthread_create(&th[t], NULL, hot_buyer, (void *)(intptr_t)t);
    }
    int total = 0;
    for (int t = 0; t < HOT_THREADS; t++) {
        pthread_join(th[t], NULL);
        total += hot_ok[t];
    }
    /* 8 x 6 x 8 entries asking for 576 units of 150: every unit sold
     * once, no more */
    ck_assert_int_eq(tu_held(f.ctx, hot_shop, 1, 1), total);
    ck_assert_int_le(total, HOT_STOCK);
    ck_assert_int_ge(total, HOT_STOCK - 1); /* (the last may ask for 2) */
    tu_fix_close(&f);
}
END_TEST

int main(void)
{
    tu_db_create("batch");
    Suite *s = suite_create("batch");
    tu_add(s, "outcomes_match_single_calls", outcomes_match_single_calls);
    tu_add(s, "repeat_is_idempotent", repeat_is_idempotent);
    tu_add(s, "claims_and_releases_match_single_calls",
           claims_and_releases_match_single_calls);
    tu_add(s, "one_and_the_most", one_and_the_most);
    tu_add(s, "refused_as_a_whole", refused_as_a_whole);
    tu_add(s, "one_statement_per_batch", one_statement_per_batch);
    tu_add(s, "distinct_keys_in_one_set", distinct_keys_in_one_set);
    tu_add_timeout(s, "hot_item_never_oversold", hot_item_never_oversold,
                   120);
    int rc = tu_run(s);
    tu_db_drop();
    return rc;
}
