/*
 * load_check.c - failover_load check: the clients' logs against one
 * server.
 *
 * Owns the verdict of the failover test: which acknowledged holds (a
 * live one with exactly its units), claims and releases a server lacks,
 * the stock on hand the acknowledged claims leave against the ledger's,
 * what rsv_audit says, and (--reconcile) re-applying the missing claims
 * and releases from the logs, which stand in for a shop's order records.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <reserve.h>

#include "failover.h"

enum { F_NONE, F_HELD, F_CLAIMED, F_RELEASED };

struct tok {
    char tok[TOKLEN];
    int used;
    int acked_hold;     /* some reserve of it returned RSV_OK */
    int fact, fact_ep;  /* the last acknowledged state change */
    long fact_ms;
    char pending;       /* a call attempted, no outcome (yet) */
    int told_notfound;  /* a claim/release said not found after a hold */
    int na;
    long ai[MAX_ALLOC], al[MAX_ALLOC], aq[MAX_ALLOC];
    int db_status;      /* 0 = no checkout row */
    int db_na;          /* its hold rows on the server */
    long db_ai[MAX_ALLOC], db_al[MAX_ALLOC], db_aq[MAX_ALLOC];
};

static struct tok *toks;
static size_t cap_toks, n_toks;

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

static void toks_grow(void);

static struct tok *tok_get(const char *s, int create)
{
    if (create && (n_toks + 1) * 2 > cap_toks)
        toks_grow();
    if (!cap_toks)
        return NULL;
    size_t i = (size_t)(hash_str(s) & (cap_toks - 1));
    while (toks[i].used) {
        if (!strcmp(toks[i].tok, s))
            return &toks[i];
        i = (i + 1) & (cap_toks - 1);
    }
    if (!create)
        return NULL;
    struct tok *t = &toks[i];
    memset(t, 0, sizeof *t);
    t->used = 1;
    snprintf(t->tok, sizeof t->tok, "%s", s);
    n_toks++;
    return t;
}

static void toks_grow(void)
{
    struct tok *old = toks;
    size_t old_cap = cap_toks;
    cap_toks = cap_toks ? cap_toks * 2 : 1024;
    toks = calloc(cap_toks, sizeof *toks);
    if (!toks)
        die("out of memory");
    n_toks = 0;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].used) {
            struct tok *t = tok_get(old[i].tok, 1);
            *t = old[i];
        }
    free(old);
}

struct key {
    long item, loc;
    int64_t stock, on_hand_db, claimed_acked, claimed_unknown;
    int found;
};

static struct key keys[64];
static int n_keys;

static struct key *key_get(long item, long loc)
{
    for (int i = 0; i < n_keys; i++)
        if (keys[i].item == item && keys[i].loc == loc)
            return &keys[i];
    if (n_keys == (int)(sizeof keys / sizeof keys[0]))
        die("too many items");
    struct key *k = &keys[n_keys++];
    memset(k, 0, sizeof *k);
    k->item = item;
    k->loc = loc;
    return k;
}

static void parse_log(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        die("%s: %s", path, strerror(errno));
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        size_t len = strlen(line);
        if (!len || line[len - 1] != '\n')
            break; /* a line still being written */
        line[len - 1] = 0;
        char tok[TOKLEN], op;
        int rc, doubt, ep, na, off = 0;
        long ms;
        struct tok *t;
        switch (line[0]) {
        case 'a':
            if (sscanf(line, "a %c %47s", &op, tok) == 2 &&
                (t = tok_get(tok, 1)))
                t->pending = op;
            break;
        case 'R':
            if (sscanf(line, "R %47s %d %d %d %ld %d%n", tok, &rc, &doubt, &ep,
                       &ms, &na, &off) < 6 || !(t = tok_get(tok, 1)))
                break;
            t->pending = 0;
            if (rc != RSV_OK)
                break; /* not held (after a doubt a release follows) */
            t->acked_hold = 1;
            t->fact = F_HELD;
            t->fact_ep = ep;
            t->fact_ms = ms;
            t->na = 0;
            for (char *p = line + off; *p && t->na < MAX_ALLOC;) {
                long i, l, q;
                int used = 0;
                if (sscanf(p, " %ld:%ld:%ld%n", &i, &l, &q, &used) != 3)
                    break;
                t->ai[t->na] = i;
                t->al[t->na] = l;
                t->aq[t->na] = q;
                t->na++;
                p += used;
            }
            break;
        case 'C':
        case 'L':
            if (sscanf(line + 2, "%47s %d %d %d %ld", tok, &rc, &doubt, &ep,
                       &ms) != 5 || !(t = tok_get(tok, 1)))
                break;
            t->pending = 0;
            if (rc == RSV_ENOTFOUND) {
                if (t->acked_hold)
                    t->told_notfound = 1;
                break;
            }
            if (line[0] == 'C' && (rc == RSV_OK || rc == RSV_ECLAIMED)) {
                t->fact = F_CLAIMED;
            } else if (line[0] == 'L' && rc == RSV_OK) {
                t->fact = F_RELEASED;
            } else if (line[0] == 'L' && rc == RSV_ECLAIMED) {
                t->fact = F_CLAIMED;
            } else {
                break; /* refused (expired, busy...): nothing changed */
            }
            t->fact_ep = ep;
            t->fact_ms = ms;
            break;
        }
    }
    fclose(f);
}

static MYSQL *admin_connect(void)
{
    ll_server srv;
    endpoint_server(0, &srv);
    srv.socket = C.socket;
    char err[512];
    MYSQL *m = ll_connect(NULL, &srv, C.db, err, sizeof err);
    if (!m)
        die("connect: %s", err);
    return m;
}

static MYSQL_RES *query(MYSQL *m, const char *q)
{
    if (mysql_query(m, q))
        die("%s: %s", q, mysql_error(m));
    MYSQL_RES *r = mysql_store_result(m);
    if (!r)
        die("%s: %s", q, mysql_error(m));
    return r;
}

static void load_db(MYSQL *m)
{
    for (size_t i = 0; i < cap_toks; i++)
        toks[i].db_status = toks[i].db_na = 0;
    MYSQL_RES *r = query(m, "SELECT checkout_token, status FROM "
                            "rsv_checkouts WHERE shop_id = 1");
    MYSQL_ROW row;
    while ((row = mysql_fetch_row(r))) {
        struct tok *t = tok_get(row[0], 0);
        if (t)
            t->db_status = atoi(row[1]);
    }
    mysql_free_result(r);
    r = query(m, "SELECT checkout_token, item_id, "
                 "location_id, quantity FROM rsv_holds "
                 "WHERE shop_id = 1");
    while ((row = mysql_fetch_row(r))) {
        struct tok *t = tok_get(row[0], 0);
        if (t && t->db_na < MAX_ALLOC) {
            t->db_ai[t->db_na] = atol(row[1]);
            t->db_al[t->db_na] = atol(row[2]);
            t->db_aq[t->db_na] = atol(row[3]);
            t->db_na++;
        }
    }
    mysql_free_result(r);
    for (int i = 0; i < n_keys; i++)
        keys[i].found = 0;
    r = query(m, "SELECT item_id, location_id, on_hand "
                 "FROM rsv_stock WHERE shop_id = 1");
    while ((row = mysql_fetch_row(r))) {
        struct key *k = key_get(atol(row[0]), atol(row[1]));
        k->found = 1;
        k->on_hand_db = atoll(row[2]);
    }
    mysql_free_result(r);
}

static void audit_cb(void *arg, uint64_t shop, uint64_t item, uint64_t loc,
                     const char *problem)
{
    (void)arg;
    printf("  audit: shop %" PRIu64 " item %" PRIu64 " location %" PRIu64
           ": %s\n", shop, item, loc, problem);
}

struct figures {
    long holds_acked, claims_acked, releases_acked;
    long holds_missing, holds_missing_told, holds_missing_abandoned;
    long claims_missing, claims_missing_absent, claims_missing_held;
    long releases_missing, releases_missing_held;
    long missing_min_ms, missing_max_ms, last_first_ms;
    int64_t units_claims_missing;
    int64_t stock_excess, stock_excess_lo, stock_excess_hi;
    int64_t audit_violations;
};

/* The units of (item, loc) in an allocation. */
static long units_at(const long *ai, const long *al, const long *aq, int n,
                     long item, long loc)
{
    long q = 0;
    for (int y = 0; y < n; y++)
        if (ai[y] == item && al[y] == loc)
            q += aq[y];
    return q;
}

/* A live hold (not abandoned, so not expired) holds exactly the units
 * its reserve acknowledged. */
static int holds_match(const struct tok *t)
{
    for (int y = 0; y < t->na; y++)
        if (units_at(t->db_ai, t->db_al, t->db_aq, t->db_na, t->ai[y],
                     t->al[y]) !=
            units_at(t->ai, t->al, t->aq, t->na, t->ai[y], t->al[y]))
            return 0;
    for (int y = 0; y < t->db_na; y++)
        if (units_at(t->ai, t->al, t->aq, t->na, t->db_ai[y], t->db_al[y]) ==
            0)
            return 0;
    return 1;
}

static void consider_missing(struct figures *fg, const struct tok *t)
{
    if (fg->missing_min_ms < 0 || t->fact_ms < fg->missing_min_ms)
        fg->missing_min_ms = t->fact_ms;
    if (t->fact_ms > fg->missing_max_ms)
        fg->missing_max_ms = t->fact_ms;
}

static int show_missing;

static void compare(MYSQL *m, struct figures *fg)
{
    memset(fg, 0, sizeof *fg);
    fg->missing_min_ms = -1;
    fg->missing_max_ms = -1;
    fg->last_first_ms = -1;
    load_db(m);
    for (int i = 0; i < n_keys; i++)
        keys[i].claimed_acked = keys[i].claimed_unknown = 0;
    for (size_t i = 0; i < cap_toks; i++) {
        struct tok *t = &toks[i];
        if (!t->used || t->fact == F_NONE)
            continue;
        if (t->fact_ep == 0 && t->fact_ms > fg->last_first_ms)
            fg->last_first_ms = t->fact_ms;
        int st = t->db_status;
        const char *bad = NULL;
        switch (t->fact) {
        case F_HELD:
            fg->holds_acked++;
            /* held or expired; a claim or release in flight (no outcome
             * yet) may have moved it on */
            if (st == 0) {
                fg->holds_missing++;
                fg->holds_missing_told += t->told_notfound;
                fg->holds_missing_abandoned += t->tok[0] == 'x';
                bad = "acknowledged hold: no checkout row";
            } else if ((st == 2 && t->pending != 'c') ||
                       (st == 3 && t->pending != 'l')) {
                fg->holds_missing++;
                bad = "acknowledged hold: settled without an acknowledged "
                      "call";
            } else if (st == 1 && t->tok[0] == 't' && !t->pending &&
                       !holds_match(t)) {
                fg->holds_missing++;
                bad = "acknowledged hold: the units held differ";
            }
            if (t->pending == 'c')
                for (int y = 0; y < t->na; y++)
                    key_get(t->ai[y], t->al[y])->claimed_unknown += t->aq[y];
            break;
        case F_CLAIMED:
            fg->claims_acked++;
            for (int y = 0; y < t->na; y++)
                key_get(t->ai[y], t->al[y])->claimed_acked += t->aq[y];
            if (st != 2) {
                fg->claims_missing++;
                if (st == 0)
                    fg->claims_missing_absent++;
                else
                    fg->claims_missing_held++;
                for (int y = 0; y < t->na; y++)
                    fg->units_claims_missing += t->aq[y];
                bad = st == 0 ? "acknowledged claim: no checkout row"
                              : "acknowledged claim: not claimed";
            }
            break;
        case F_RELEASED:
            fg->releases_acked++;
            if (st != 3 && st != 4) {
                fg->releases_missing++;
                /* with no row at all, the hold went too: nothing is held */
                fg->releases_missing_held += st != 0;
                bad = st == 0 ? "acknowledged release: no checkout row"
                              : "acknowledged release: not released";
            }
            break;
        }
        if (bad) {
            consider_missing(fg, t);
            if (show_missing-- > 0)
                printf("  missing: %s (%s at %.3f s on server %d, status "
                       "now %d)\n", t->tok, bad, t->fact_ms / 1000.0,
                       t->fact_ep, st);
        }
    }
    for (int i = 0; i < n_keys; i++) {
        struct key *k = &keys[i];
        if (!k->found) {
            printf("  no ledger row for item %ld location %ld\n", k->item,
                   k->loc);
            continue;
        }
        /* on hand as acknowledged: the stock put in, less every claim
         * acknowledged, less (perhaps) the claims still in flight */
        int64_t exp_max = k->stock - k->claimed_acked;
        int64_t exp_min = exp_max - k->claimed_unknown;
        int64_t hi = k->on_hand_db - exp_min, lo = k->on_hand_db - exp_max;
        if (lo > 0 || hi < 0)
            printf("  item %ld location %ld: on hand %" PRId64 ", the "
                   "acknowledged claims leave %" PRId64 "..%" PRId64 "\n",
                   k->item, k->loc, k->on_hand_db, exp_min, exp_max);
        /* what is certainly wrong, and the range the claims without an
         * outcome leave open */
        fg->stock_excess += lo > 0 ? lo : (hi < 0 ? hi : 0);
        fg->stock_excess_lo += lo;
        fg->stock_excess_hi += hi;
    }
    rsv_ctx *ctx = NULL;
    if (rsv_open(&ctx, m, NULL) != RSV_OK)
        die("rsv_open: %s", rsv_errmsg(ctx));
    int64_t v = 0;
    if (rsv_audit(ctx, SHOP, 0, audit_cb, NULL, &v) != RSV_OK)
        die("rsv_audit: %s", rsv_errmsg(ctx));
    rsv_close(ctx);
    fg->audit_violations = v;
}

static void print_figures(const char *label, const struct figures *fg)
{
    long window = fg->missing_min_ms >= 0 && fg->last_first_ms >= 0
                      ? fg->last_first_ms - fg->missing_min_ms
                      : 0;
    printf("check[%s]: holds_acked=%ld claims_acked=%ld releases_acked=%ld "
           "holds_missing=%ld holds_missing_abandoned=%ld "
           "holds_missing_told_notfound=%ld "
           "claims_missing=%ld claims_missing_no_row=%ld "
           "claims_missing_still_held=%ld releases_missing=%ld "
           "releases_missing_still_held=%ld "
           "units_of_missing_claims=%" PRId64 " stock_on_hand_excess=%" PRId64
           " audit_violations=%" PRId64 " missing_window_ms=%ld\n",
           label, fg->holds_acked, fg->claims_acked, fg->releases_acked,
           fg->holds_missing, fg->holds_missing_abandoned,
           fg->holds_missing_told, fg->claims_missing,
           fg->claims_missing_absent, fg->claims_missing_held,
           fg->releases_missing, fg->releases_missing_held,
           fg->units_claims_missing,
           fg->stock_excess, fg->audit_violations, window);
    if (fg->stock_excess_lo != fg->stock_excess_hi)
        printf("check[%s]: stock on hand excess is %" PRId64 "..%" PRId64
               " (claims without an outcome)\n", label, fg->stock_excess_lo,
               fg->stock_excess_hi);
}

/* Re-apply what the logs say was acknowledged and is missing: claims
 * (a checkout still held is claimed; one that is gone is reserved again
 * with its logged allocation and claimed) and releases.  The logs stand in
 * for the shop's own order records. */
static void reconcile(MYSQL *m)
{
    rsv_ctx *ctx = NULL;
    if (rsv_open(&ctx, m, NULL) != RSV_OK)
        die("rsv_open: %s", rsv_errmsg(ctx));
    rsv_cart *cart;
    if (rsv_cart_new(&cart) != RSV_OK)
        die("out of memory");
    long claimed = 0, rereserved = 0, released = 0, failed = 0;
    for (size_t i = 0; i < cap_toks; i++) {
        struct tok *t = &toks[i];
        if (!t->used)
            continue;
        size_t tl = strlen(t->tok);
        int rc = RSV_OK;
        if (t->fact == F_CLAIMED && t->db_status != 2) {
            if (t->db_status == 0) {
                rsv_cart_clear(cart);
                for (int y = 0; y < t->na; y++) {
                    uint64_t loc = (uint64_t)t->al[y];
                    rsv_cart_add(cart, (uint64_t)t->ai[y], &loc, 1, t->aq[y],
                                 0);
                }
                rc = rsv_reserve(ctx, SHOP, t->tok, tl, cart, 0);
                rereserved += rc == RSV_OK;
            }
            if (rc == RSV_OK)
                rc = rsv_claim(ctx, SHOP, t->tok, tl);
            if (rc == RSV_OK)
                claimed++;
        } else if (t->fact == F_RELEASED && t->db_status == 1) {
            rc = rsv_release(ctx, SHOP, t->tok, tl);
            if (rc == RSV_OK)
                released++;
        }
        if (rc != RSV_OK) {
            failed++;
            printf("  reconcile %s: %s: %s\n", t->tok, rsv_code_name(rc),
                   rsv_errmsg(ctx));
        }
    }
    rsv_cart_free(cart);
    rsv_close(ctx);
    printf("reconcile: claims re-applied %ld (of which reserved again first "
           "%ld), releases re-applied %ld, failed %ld\n", claimed, rereserved,
           released, failed);
}

int check_main(void)
{
    char path[600];
    snprintf(path, sizeof path, "%s/stock.txt", C.logdir);
    FILE *f = fopen(path, "r");
    if (!f)
        die("%s: %s", path, strerror(errno));
    long item, loc;
    int64_t stock;
    while (fscanf(f, "%ld %ld %" SCNd64, &item, &loc, &stock) == 3)
        key_get(item, loc)->stock = stock;
    fclose(f);
    DIR *d = opendir(C.logdir);
    if (!d)
        die("%s: %s", C.logdir, strerror(errno));
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] != 'c' || !strstr(e->d_name, ".log"))
            continue;
        snprintf(path, sizeof path, "%s/%s", C.logdir, e->d_name);
        parse_log(path);
    }
    closedir(d);
    MYSQL *m = admin_connect();
    struct figures fg;
    show_missing = 5;
    compare(m, &fg);
    print_figures(C.label, &fg);
    long missing = fg.holds_missing + fg.claims_missing + fg.releases_missing;
    int clean = !missing && fg.stock_excess == 0 && !fg.audit_violations;
    if (C.expect_loss) {
        /* the checker's own test: where work was lost, it must say so */
        int found = fg.holds_missing + fg.claims_missing > 0;
        printf("check[%s]: expected loss %s\n", C.label,
               found ? "found" : "NOT found");
        mysql_close(m);
        return found ? 0 : 1;
    }
    if (C.reconcile && !clean) {
        reconcile(m);
        show_missing = 5;
        compare(m, &fg);
        char label[80];
        snprintf(label, sizeof label, "%s, after reconciling", C.label);
        print_figures(label, &fg);
        /* lost holds are not re-created: their buyers were told "not
         * found" or will be at their claim; a lost release whose hold is
         * gone too holds nothing */
        clean = !fg.claims_missing && !fg.releases_missing_held &&
                fg.stock_excess == 0 && !fg.audit_violations;
        mysql_close(m);
        return clean ? 0 : 1;
    }
    mysql_close(m);
    return clean ? 0 : 1;
}
