/*
 * reserve_next.c - which pass a reserve runs next: the one place that
 * decides it.  The driver (reserve_run in reserve.c) runs a pass, gathers
 * the facts (reserve_facts), asks reserve_next() and runs what it says,
 * until it says PASS_DONE.  Also here, the two decisions the slow path
 * makes once it holds the ledger rows (lock mode, back to the fast path).
 *
 * Everything here is pure: it reads the job and the facts it is given
 * and changes only the rstate it is given, and calls no other file of
 * the library, so tests/check_decisions.c links this file alone and
 * checks every row of docs/internals.md section 2.3 against it.
 */
#include "reserve_job.h"

/* Times one reserve may go back from the slow path to the fast path: a
 * bound, so a pool refilled and emptied again and again by other buyers
 * cannot keep one buyer going round. */
#define MAX_BACK_TO_FAST 2

/* The fast path: in one round trip when a procedure can do it. */
static rpass fast(const rfacts *f)
{
    return f->proc_fits ? PASS_CALL : PASS_STATEMENTS;
}

/* The slow path considers every location of every line, and starts in
 * the lock mode reserve_ledger_mode() picks. */
static rpass slow(rstate *st)
{
    st->wide = 1;
    st->ledger_excl = 0;
    return PASS_SLOW;
}

/* A pass of the fast path, by procedure or by statements. */
static int is_fast(rpass p)
{
    return p == PASS_CALL || p == PASS_STATEMENTS;
}

rpass reserve_next(rstate *st, rpass last, int rc, rend end,
                   const rfacts *f)
{
    if (last == PASS_START) {
        if (end != END_FINAL || rc != RSV_OK)
            return PASS_DONE;
        /* A line this context found sold out: ask the read first, so
         * pools restocked since cost one read and sold-out ones no
         * checkout row inserted and rolled back. */
        if (f->marked_sold_out) {
            st->then_slow = 0;
            return PASS_SOLD_OUT;
        }
        return fast(f);
    }
    if (end == END_FINAL) {
        if (rc != RSV_OK)
            return PASS_DONE; /* out of stock, claimed, errors: as is */
        switch (last) {
        case PASS_SOLD_OUT:
            return st->then_slow ? slow(st) : fast(f);
        case PASS_CALL:
        case PASS_STATEMENTS:
            return PASS_REFILL; /* committed: top up pools running low */
        default: /* (the slow path and the waited ledger take topped
                  * the pool up themselves) */
            return PASS_DONE;
        }
    }
    switch (end) {
    case END_CURSOR_SHORT:
        /* Rows below the cursor may be free: the same pass from the
         * bottom, once (a read from the bottom never ends this way). */
        if (!is_fast(last) || st->rescan)
            return PASS_DONE;
        st->rescan = 1;
        return last;
    case END_NARROW:
        /* The same pass reading every location, once. */
        if (!is_fast(last) || st->wide)
            return PASS_DONE;
        st->wide = 1;
        return last;
    case END_NO_PROC:
        return last == PASS_CALL ? PASS_STATEMENTS : PASS_DONE;
    case END_SHORT:
        /* The waited take in share mode found the pool short still (no
         * refill came, or not enough): the exclusive one, which takes the
         * units from the ledger row.  After that, the ledger row could not
         * give them: no refill can come (it would take them from the same
         * row), so the slow path locks it exclusively at once. */
        if (last == PASS_LEDGER) {
            if (f->ledger_fits && st->ledger_tried == 1) {
                st->ledger_tried = 2;
                return PASS_LEDGER;
            }
            slow(st);
            st->ledger_excl = 1;
            return PASS_SLOW;
        }
        if (!is_fast(last))
            return PASS_DONE;
        /* Short where the ledger could not cover the line either: one
         * read without the ledger lock may answer out of stock before
         * the whole cart's ledger rows are locked for nothing. */
        if (f->short_unsure) {
            st->then_slow = 1;
            return PASS_SOLD_OUT;
        }
        /* A new checkout's one key, whose ledger row has the units: wait
         * for that row in one transaction: in share mode first (a refill
         * in flight serves every buyer waiting so at once), then, if the
         * pool is short still, exclusively to take the units from the row
         * itself.  The slow path would hold the row across its round
         * trips, and when a crowd finds a small pool empty, the last of
         * them ran out of time queueing for it (docs/internals.md
         * section 4). */
        if (f->ledger_fits && !st->ledger_tried) {
            st->ledger_tried = 1;
            return PASS_LEDGER;
        }
        return slow(st);
    case END_SHARED_IN_VAIN:
        if (last != PASS_SLOW)
            return PASS_DONE;
        st->ledger_excl = 1;
        return PASS_SLOW;
    case END_REFILLED:
        if (last != PASS_SLOW)
            return PASS_DONE;
        st->back_to_fast++;
        return fast(f);
    default:
        return PASS_DONE;
    }
}

/* Whether every pool the fast path found short has been refilled since
 * (the locked ledger row's next_unit_id moved past the one the fast read
 * saw).  When a hot pool runs dry, every buyer of that moment queues for
 * the ledger row; the first refills the pool, and the others, instead of
 * each holding the row through a whole slow path in turn, let go of it at
 * once and take the fast path again. */
int reserve_refilled_since(const rjob *j)
{
    if (j->st.back_to_fast >= MAX_BACK_TO_FAST)
        return 0;
    int any = 0;
    for (size_t k = 0; k < j->nkeys; k++) {
        const rkey *key = &j->keys[k];
        if (!key->slow.fast_next)
            continue;
        if (key->slow.lv.next_id <= key->slow.fast_next)
            return 0;
        any = 1;
    }
    return any;
}

/* How the slow path locks the ledger rows.  When a hot pool runs dry a
 * refill is usually already running, holding the ledger row, and every
 * buyer of that moment comes here.  Waiting FOR UPDATE they were granted
 * the row one after the other, each only to find the pool refilled (a
 * convoy of lock hand-offs); waiting in share mode they are all granted
 * it together when the refill commits.  Worth it only when a refill can
 * come: every pool the fast path found short had units left on its
 * ledger row.  A shared wait that finds nothing refilled costs a second
 * start, locking exclusively; shared holders never upgrade (two would
 * deadlock). */
int reserve_ledger_mode(const rjob *j)
{
    if (j->st.ledger_excl || j->st.back_to_fast >= MAX_BACK_TO_FAST)
        return LEDGER_WAIT;
    int any = 0;
    for (size_t k = 0; k < j->nkeys; k++) {
        const rkey *key = &j->keys[k];
        if (!key->slow.fast_next)
            continue;
        if (key->slow.fast_avail <= 0)
            return LEDGER_WAIT;
        any = 1;
    }
    return any ? LEDGER_SHARE : LEDGER_WAIT;
}

/* Whether the waited ledger take can serve this reserve after a short
 * fast read: a new checkout (no row was found) whose cart is one key, that
 * came up short while its ledger row, as last committed, had at least the
 * units wanted. */
int reserve_ledger_fits(const rjob *j)
{
    if (j->nkeys != 1 || j->prev_found)
        return 0;
    const rkey *key = &j->keys[0];
    return key->slow.fast_next && key->slow.fast_avail >= key->plan.want;
}
