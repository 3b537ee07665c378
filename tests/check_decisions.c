/*
 * check_decisions.c - the reserve's decision table, executed.
 *
 * docs/internals.md section 2.3 is a table of which pass a reserve runs
 * next.  This suite reads that table from the page, links lib/reserve_next.c
 * alone (it is pure: no server, no other file of the library), and runs
 * reserve_next() on every combination of the pass that ran, how it ended,
 * the facts and the decision state.  Each combination must do what the
 * first row that matches it says (the next pass and the state change); a
 * combination that no row matches must answer PASS_DONE and change
 * nothing; and every row must decide some combination.  A second test
 * changes each row in turn and requires the comparison to notice, so no
 * row goes unchecked.  Also here: the two decisions the slow path makes
 * once it holds the ledger rows (reserve_ledger_mode,
 * reserve_refilled_since).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reserve_job.h"

#ifndef RSV_SOURCE_DIR
#define RSV_SOURCE_DIR "."
#endif

/* ---- the table, as docs/internals.md writes it ---- */

enum { NPASS = PASS_DONE + 1 };
static const char *pass_names[NPASS] = {
    [PASS_START] = "PASS_START",           [PASS_SOLD_OUT] = "PASS_SOLD_OUT",
    [PASS_CALL] = "PASS_CALL",             [PASS_STATEMENTS] = "PASS_STATEMENTS",
    [PASS_SLOW] = "PASS_SLOW",             [PASS_REFILL] = "PASS_REFILL",
    [PASS_LEDGER] = "PASS_LEDGER",         [PASS_DONE] = "PASS_DONE",
};
enum { NEND = END_SHARED_IN_VAIN + 1 };
static const char *end_names[NEND] = {
    [END_FINAL] = "END_FINAL",
    [END_CURSOR_SHORT] = "END_CURSOR_SHORT",
    [END_NARROW] = "END_NARROW",
    [END_NO_PROC] = "END_NO_PROC",
    [END_SHORT] = "END_SHORT",
    [END_REFILLED] = "END_REFILLED",
    [END_SHARED_IN_VAIN] = "END_SHARED_IN_VAIN",
};

/* The variables a row may require or change: the four facts, then the
 * six fields of rstate. */
enum { V_PROC_FITS, V_MARKED, V_UNSURE, V_LEDGER_FITS, V_RESCAN, V_WIDE,
       V_EXCL, V_BACK, V_THEN_SLOW, V_LEDGER_TRIED, NVARS };
static const char *var_names[NVARS] = {
    "proc_fits", "marked_sold_out", "short_unsure", "ledger_fits", "rescan",
    "wide", "ledger_excl", "back_to_fast", "then_slow", "ledger_tried",
};

enum { ENDED_OK = -1, ENDED_ERROR = -2 }; /* else an END_* */

#define SAME_PASS (-1)
typedef struct row {
    int line;
    unsigned after;          /* bit per pass */
    int ended;               /* ENDED_OK, ENDED_ERROR, or END_* */
    int need[NVARS];         /* -1: any */
    int next;                /* a pass, or SAME_PASS */
    int set[NVARS];          /* -1: unchanged */
    int add[NVARS];          /* + this */
    int used;                /* combinations it decided */
} row;

#define MAX_ROWS 64
static row rows[MAX_ROWS];
static int nrows;

static int lookup(const char *const *names, int n, const char *s)
{
    for (int i = 0; i < n; i++)
        if (names[i] && strcmp(names[i], s) == 0)
            return i;
    return -1;
}

/* The `...` spans of one cell, in order. */
static int spans(const char *cell, char out[][64], int max)
{
    int n = 0;
    const char *p = cell;
    while (n < max && (p = strchr(p, '`'))) {
        const char *q = strchr(p + 1, '`');
        if (!q)
            break;
        size_t len = (size_t)(q - p - 1);
        if (len >= 64)
            len = 63;
        memcpy(out[n], p + 1, len);
        out[n][len] = '\0';
        n++;
        p = q + 1;
    }
    return n;
}

/* "name = v", "name + 1" or "name" into (var, op, value). */
static int parse_var(const char *s, int *var, char *op, int *val)
{
    char name[64];
    int v = 1;
    *op = '=';
    if (sscanf(s, "%63[a-z_] = %d", name, &v) == 2)
        *op = '=';
    else if (sscanf(s, "%63[a-z_] + %d", name, &v) == 2)
        *op = '+';
    else if (sscanf(s, "%63[a-z_]", name) == 1 && !strchr(s, ' '))
        v = 1;
    else
        return -1;
    *var = lookup(var_names, NVARS, name);
    *val = v;
    return *var < 0 ? -1 : 0;
}

static void fail_parse(int line, const char *what, const char *s)
{
    ck_abort_msg("docs/internals.md:%d: %s `%s` in the decision table", line,
                 what, s);
}

static void load_table(void)
{
    if (nrows)
        return;
    const char *path = RSV_SOURCE_DIR "/docs/internals.md";
    FILE *fp = fopen(path, "r");
    ck_assert_msg(fp != NULL, "cannot read %s", path);
    char buf[2048];
    int line = 0, in_section = 0, in_table = 0;
    while (fgets(buf, sizeof buf, fp)) {
        line++;
        if (strncmp(buf, "### 2.3 ", 8) == 0) {
            in_section = 1;
            continue;
        }
        if (in_section && strncmp(buf, "### ", 4) == 0)
            break;
        if (!in_section)
            continue;
        if (strncmp(buf, "| after |", 9) == 0) {
            in_table = 1;
            continue;
        }
        if (!in_table || strncmp(buf, "|---", 4) == 0)
            continue;
        if (buf[0] != '|')
            break;
        /* five cells */
        char *cells[6];
        int nc = 0;
        char *p = buf + 1;
        while (nc < 6 && p) {
            cells[nc++] = p;
            p = strchr(p, '|');
            if (p)
                *p++ = '\0';
        }
        ck_assert_msg(nc >= 5, "docs/internals.md:%d: a row of the decision "
                      "table has %d cells, not 5", line, nc);
        ck_assert_int_lt(nrows, MAX_ROWS);
        row *r = &rows[nrows++];
        memset(r, 0, sizeof *r);
        r->line = line;
        for (int v = 0; v < NVARS; v++)
            r->need[v] = r->set[v] = -1;
        char sp[16][64];
        int n = spans(cells[0], sp, 16);
        for (int i = 0; i < n; i++) {
            int pass = lookup(pass_names, NPASS, sp[i]);
            if (pass < 0 || pass == PASS_DONE)
                fail_parse(line, "unknown pass", sp[i]);
            r->after |= 1u << pass;
        }
        if (!r->after)
            fail_parse(line, "no pass in", cells[0]);
        n = spans(cells[1], sp, 16);
        if (n != 1)
            fail_parse(line, "not one ending in", cells[1]);
        if (strcmp(sp[0], "RSV_OK") == 0)
            r->ended = ENDED_OK;
        else if (strcmp(sp[0], "RSV_E*") == 0)
            r->ended = ENDED_ERROR;
        else if ((r->ended = lookup(end_names, NEND, sp[0])) <= END_FINAL)
            fail_parse(line, "unknown ending", sp[0]);
        n = spans(cells[2], sp, 16);
        for (int i = 0; i < n; i++) {
            int var, val;
            char op;
            if (parse_var(sp[i], &var, &op, &val) || op != '=')
                fail_parse(line, "unknown condition", sp[i]);
            r->need[var] = val;
        }
        n = spans(cells[3], sp, 16);
        if (n != 1)
            fail_parse(line, "not one next pass in", cells[3]);
        if (strcmp(sp[0], "the same") == 0)
            r->next = SAME_PASS;
        else if ((r->next = lookup(pass_names, NPASS, sp[0])) < 0)
            fail_parse(line, "unknown next pass", sp[0]);
        n = spans(cells[4], sp, 16);
        for (int i = 0; i < n; i++) {
            int var, val;
            char op;
            if (parse_var(sp[i], &var, &op, &val) || var < V_RESCAN)
                fail_parse(line, "unknown change", sp[i]);
            if (op == '=')
                r->set[var] = val;
            else
                r->add[var] = val;
        }
    }
    fclose(fp);
    ck_assert_msg(nrows >= 10, "found %d rows of the decision table in %s",
                  nrows, path);
}

/* ---- one combination ---- */

typedef struct combo {
    rpass last;
    rend end;
    int rc;
    int vars[NVARS];
} combo;

static int row_matches(const row *r, const combo *c)
{
    if (!(r->after & (1u << c->last)))
        return 0;
    if (r->ended == ENDED_OK && !(c->end == END_FINAL && c->rc == RSV_OK))
        return 0;
    if (r->ended == ENDED_ERROR && !(c->end == END_FINAL && c->rc != RSV_OK))
        return 0;
    if (r->ended >= 0 && (int)c->end != r->ended)
        return 0;
    for (int v = 0; v < NVARS; v++)
        if (r->need[v] >= 0 && c->vars[v] != r->need[v])
            return 0;
    return 1;
}

static void to_state(const int *vars, rstate *st, rfacts *f)
{
    f->proc_fits = vars[V_PROC_FITS];
    f->marked_sold_out = vars[V_MARKED];
    f->short_unsure = vars[V_UNSURE];
    f->ledger_fits = vars[V_LEDGER_FITS];
    st->rescan = vars[V_RESCAN];
    st->wide = vars[V_WIDE];
    st->ledger_excl = vars[V_EXCL];
    st->back_to_fast = vars[V_BACK];
    st->then_slow = vars[V_THEN_SLOW];
    st->ledger_tried = vars[V_LEDGER_TRIED];
}

static void describe(const combo *c, char *out, size_t len)
{
    size_t o = (size_t)snprintf(out, len, "after %s, %s%s%s",
                                pass_names[c->last], end_names[c->end],
                                c->end == END_FINAL ? " " : "",
                                c->end != END_FINAL ? ""
                                : c->rc == RSV_OK   ? "RSV_OK"
                                                    : rsv_code_name(c->rc));
    for (int v = 0; v < NVARS && o < len; v++)
        o += (size_t)snprintf(out + o, len - o, ", %s=%d", var_names[v],
                              c->vars[v]);
}

/* Run reserve_next on c and compare with the first matching row of t.
 * Returns 0 when they agree, else 1 with why (first mismatch only). */
static int check_combo(row *t, int nt, const combo *c, char *why,
                       size_t whylen)
{
    rstate st;
    rfacts f;
    to_state(c->vars, &st, &f);
    rstate before = st;
    rpass got = reserve_next(&st, c->last, c->rc, c->end, &f);
    row *r = NULL;
    for (int i = 0; i < nt && !r; i++)
        if (row_matches(&t[i], c))
            r = &t[i];
    rpass want = PASS_DONE;
    rstate want_st = before;
    if (r) {
        r->used++;
        want = r->next == SAME_PASS ? c->last : (rpass)r->next;
        int vars[NVARS];
        memcpy(vars, c->vars, sizeof vars);
        for (int v = V_RESCAN; v < NVARS; v++) {
            if (r->set[v] >= 0)
                vars[v] = r->set[v];
            vars[v] += r->add[v];
        }
        rfacts unused;
        to_state(vars, &want_st, &unused);
    }
    if (got == want && memcmp(&st, &want_st, sizeof st) == 0)
        return 0;
    char d[512];
    describe(c, d, sizeof d);
    snprintf(why, whylen,
             "%s: reserve_next says %s (rescan %d wide %d ledger_excl %d "
             "back_to_fast %d then_slow %d ledger_tried %d); %s says %s "
             "(rescan %d wide %d ledger_excl %d back_to_fast %d then_slow %d "
             "ledger_tried %d)",
             d, pass_names[got], st.rescan, st.wide, st.ledger_excl,
             st.back_to_fast, st.then_slow, st.ledger_tried,
             r ? "its first matching row" : "no row matches, so the table",
             pass_names[want], want_st.rescan, want_st.wide,
             want_st.ledger_excl, want_st.back_to_fast, want_st.then_slow,
             want_st.ledger_tried);
    return 1;
}

/* The variables that count (0, 1 or 2); the others are 0 or 1. */
static int counts(int v) { return v == V_BACK || v == V_LEDGER_TRIED; }

/* Every combination: the passes that run, every ending (two final error
 * codes stand for all), every fact and state value a decision reads. */
static int run_all(row *t, int nt, char *why, size_t whylen)
{
    static const int codes[] = {RSV_OK, RSV_EOUTOFSTOCK, RSV_EBUSY};
    int bad = 0;
    char first[1024] = "";
    for (int last = PASS_START; last < PASS_DONE; last++)
        for (int end = END_FINAL; end < NEND; end++)
            for (int k = 0; k < (end == END_FINAL ? 3 : 1); k++)
                for (unsigned bits = 0; bits < (1u << (NVARS - 2)); bits++)
                    for (int back = 0; back <= 2; back++)
                    for (int tried = 0; tried <= 2; tried++) {
                        combo c = {(rpass)last, (rend)end,
                                   end == END_FINAL ? codes[k]
                                                    : RSV__PASS_ENDED,
                                   {0}};
                        for (int v = 0, b = 0; v < NVARS; v++)
                            if (!counts(v))
                                c.vars[v] = (bits >> b++) & 1;
                        c.vars[V_BACK] = back;
                        c.vars[V_LEDGER_TRIED] = tried;
                        char w[1024];
                        if (check_combo(t, nt, &c, w, sizeof w)) {
                            if (!bad)
                                snprintf(first, sizeof first, "%s", w);
                            bad++;
                        }
                    }
    snprintf(why, whylen, "%d combinations disagree; the first: %s", bad,
             first);
    return bad;
}

START_TEST(the_table_is_the_code)
{
    load_table();
    for (int i = 0; i < nrows; i++)
        rows[i].used = 0;
    char why[1200];
    int bad = run_all(rows, nrows, why, sizeof why);
    ck_assert_msg(bad == 0, "%s", why);
    for (int i = 0; i < nrows; i++)
        ck_assert_msg(rows[i].used > 0,
                      "docs/internals.md:%d: this row of the decision table "
                      "decides no combination (the rows above it take them "
                      "all)", rows[i].line);
}
END_TEST

/* Each row, changed, is noticed: its next pass moved to another one, or
 * (for rows that change state) its change dropped. */
START_TEST(every_row_is_checked)
{
    load_table();
    for (int i = 0; i < nrows; i++) {
        row t[MAX_ROWS];
        memcpy(t, rows, sizeof t);
        int next = t[i].next == SAME_PASS ? PASS_DONE : t[i].next;
        t[i].next = next == PASS_DONE ? PASS_SLOW : PASS_DONE;
        char why[1200];
        ck_assert_msg(run_all(t, nrows, why, sizeof why) > 0,
                      "docs/internals.md:%d: changing this row's next pass "
                      "went unnoticed", rows[i].line);
        memcpy(t, rows, sizeof t);
        int changes = 0;
        for (int v = 0; v < NVARS; v++) {
            changes += t[i].set[v] >= 0 || t[i].add[v];
            t[i].set[v] = -1;
            t[i].add[v] = 0;
        }
        if (changes)
            ck_assert_msg(run_all(t, nrows, why, sizeof why) > 0,
                          "docs/internals.md:%d: dropping this row's state "
                          "change went unnoticed", rows[i].line);
    }
}
END_TEST

/* ---- the slow path's two decisions ---- */

static rkey keys[3];

static rjob job_of(size_t n)
{
    rjob j;
    memset(&j, 0, sizeof j);
    j.keys = keys;
    j.nkeys = n;
    return j;
}

START_TEST(ledger_mode)
{
    memset(keys, 0, sizeof keys);
    rjob j = job_of(2);
    /* no key came up short: nothing to wait for in share mode */
    ck_assert_int_eq(reserve_ledger_mode(&j), LEDGER_WAIT);
    /* a short key whose ledger row had units left: a refill can come */
    keys[0].slow.fast_next = 10;
    keys[0].slow.fast_avail = 5;
    ck_assert_int_eq(reserve_ledger_mode(&j), LEDGER_SHARE);
    /* another short key with nothing left: exclusive */
    keys[1].slow.fast_next = 20;
    keys[1].slow.fast_avail = 0;
    ck_assert_int_eq(reserve_ledger_mode(&j), LEDGER_WAIT);
    keys[1].slow.fast_avail = 3;
    ck_assert_int_eq(reserve_ledger_mode(&j), LEDGER_SHARE);
    /* a shared wait in vain, or two trips back: exclusive */
    j.st.ledger_excl = 1;
    ck_assert_int_eq(reserve_ledger_mode(&j), LEDGER_WAIT);
    j.st.ledger_excl = 0;
    j.st.back_to_fast = 2;
    ck_assert_int_eq(reserve_ledger_mode(&j), LEDGER_WAIT);
}
END_TEST

START_TEST(refilled_since)
{
    memset(keys, 0, sizeof keys);
    rjob j = job_of(2);
    /* no short key: nothing to have been refilled */
    ck_assert_int_eq(reserve_refilled_since(&j), 0);
    keys[0].slow.fast_next = 10;
    keys[0].slow.lv.next_id = 10;
    ck_assert_int_eq(reserve_refilled_since(&j), 0);
    keys[0].slow.lv.next_id = 11;
    ck_assert_int_eq(reserve_refilled_since(&j), 1);
    /* every short key must have moved */
    keys[1].slow.fast_next = 30;
    keys[1].slow.lv.next_id = 30;
    ck_assert_int_eq(reserve_refilled_since(&j), 0);
    keys[1].slow.lv.next_id = 40;
    ck_assert_int_eq(reserve_refilled_since(&j), 1);
    /* at most twice back to the fast path */
    j.st.back_to_fast = 2;
    ck_assert_int_eq(reserve_refilled_since(&j), 0);
}
END_TEST

/* The internal results a pass returns never equal a public code. */
START_TEST(internal_codes_apart)
{
    int internal[] = {RSV__RETRY, RSV__REFUSED, RSV__NO_PROC,
                      RSV__PASS_ENDED};
    for (size_t i = 0; i < sizeof internal / sizeof internal[0]; i++) {
        ck_assert_int_ne(internal[i], RSV_PENDING);
        ck_assert_msg(internal[i] < RSV__LAST_CODE,
                      "internal code %d is among the public codes",
                      internal[i]);
        for (size_t k = 0; k < i; k++)
            ck_assert_int_ne(internal[i], internal[k]);
    }
}
END_TEST

/* rsv_code_name, used by describe(): the one public function this suite
 * needs, given here (the suite links reserve_next.o alone). */
const char *rsv_code_name(int code)
{
    return code == RSV_EOUTOFSTOCK ? "RSV_EOUTOFSTOCK"
           : code == RSV_EBUSY     ? "RSV_EBUSY"
                                   : "another code";
}

int main(void)
{
    Suite *s = suite_create("decisions");
    TCase *tc = tcase_create("table");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, the_table_is_the_code);
    tcase_add_test(tc, every_row_is_checked);
    tcase_add_test(tc, ledger_mode);
    tcase_add_test(tc, refilled_since);
    tcase_add_test(tc, internal_codes_apart);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
