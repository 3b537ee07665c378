/*
 * fault.h - fault injection for the test-only build (-DRSV_FAULT_INJECTION,
 * build/fault/libreserve-fault.a).  Never part of the production library:
 * without the define the hooks below compile to nothing and fault.c is
 * empty, so libreserve.so exports and does nothing new.
 *
 * Every database call of the library (sql_run, sql_text, and the checks
 * rsv_open makes) is counted per context.  rsv__fault_arm() makes call
 * number nth (1-based, counted from the arm) fail with one kind of fault,
 * so a test can walk an operation through every failure point: run it
 * once unarmed to count its calls, then arm each call in turn.
 *
 * Kinds, and why each is injected the way it is:
 *  - DEADLOCK / LOCKWAIT: report 1213 / 1205 instead of running the call,
 *    once.  The frame must roll back and retry, so the operation succeeds.
 *  - DEADLOCK_ALWAYS / LOCKWAIT_ALWAYS: the same, and again every time the
 *    same statement comes round (each retry): the answer is RSV_EBUSY.
 *  - GONE: report 2006 without running the call, and really close the
 *    socket, so the session is gone on the server too (it rolls back).
 *  - LOST: close the socket, then let the real call run into it: the error
 *    is whatever Connector/C reports, nothing is simulated.  On COMMIT this
 *    is the lost-before-COMMIT case: nothing applied, yet the library
 *    cannot know that and must say RSV_EINDOUBT.
 *  - LOST_AFTER: run the call for real, then close the socket and report
 *    2013.  On COMMIT the transaction was applied and the answer must be
 *    RSV_EINDOUBT; on any other statement RSV_ECONN (the server rolls back).
 *  - OOM: the library's own allocation for that call fails (the out-of-
 *    memory flag its growable buffers set when realloc fails), so the real
 *    RSV_ENOMEM path runs.  Chosen over client error 2008: after
 *    CR_OUT_OF_MEMORY the connector's protocol state is undefined, which
 *    cannot be simulated faithfully, while our own allocations fail
 *    cleanly and are what the library must handle.
 *
 * State is process-global and follows one context at a time (a test
 * binary, never the library's users); arm with ctx NULL to follow the next
 * context rsv_open() creates.
 */
#ifndef RSV_FAULT_H
#define RSV_FAULT_H

#include <stdint.h>

#include "internal.h"

enum rsv_fault_kind {
    RSV_FAULT_NONE,
    RSV_FAULT_DEADLOCK,
    RSV_FAULT_LOCKWAIT,
    RSV_FAULT_DEADLOCK_ALWAYS,
    RSV_FAULT_LOCKWAIT_ALWAYS,
    RSV_FAULT_GONE,
    RSV_FAULT_LOST,
    RSV_FAULT_LOST_AFTER,
    RSV_FAULT_OOM,
    RSV_FAULT__COUNT
};

/* How a procedure's answer tells that it committed: its last row's
 * column 0 is 0 (the reserve procedures), its column 4 is above 0 (the
 * settle procedure), or always (a batch procedure, whose rows are per
 * entry). */
enum { FAULT_ANSWER_STATUS, FAULT_ANSWER_DONE, FAULT_ANSWER_BATCH };

#ifdef RSV_FAULT_INJECTION

/* Follow ctx (NULL: the next context opened), reset its call counter and
 * make call nth fail with kind (RSV_FAULT_NONE: only count). */
void rsv__fault_arm(rsv_ctx *ctx, uint64_t nth_call, int kind);
/* Stop injecting; the counter keeps running. */
void rsv__fault_disarm(void);
/* Calls made by the followed context since the arm (ctx NULL: whichever
 * context is followed, e.g. one opened and closed since). */
uint64_t rsv__fault_calls(const rsv_ctx *ctx);
/* How many calls the armed fault hit (0: it never came round). */
int rsv__fault_fired(void);
/* What call i (1-based) was: the text of a fixed statement ("COMMIT",
 * "START TRANSACTION" ...), "stmt" for a prepared statement, "query" for
 * the checks of rsv_open; NULL beyond the calls recorded. */
const char *rsv__fault_call(uint64_t i);
/* Pretend the connection id did not change (after a reconnect), as when a
 * restarted server hands out the old id again. */
void rsv__fault_keep_thread_id(rsv_ctx *ctx, unsigned long thread_id);
/* Make rsv_open() see this server instead of the real one (version as
 * mysql_get_server_version() gives it, e.g. 100505 for 10.5.5; info as
 * mysql_get_server_info()); version 0 stops pretending.  There is no
 * server too old for SKIP LOCKED in the test environment. */
void rsv__fault_pretend_server(unsigned long version, const char *info);
const char *rsv__fault_kind_name(int kind);

/* The shape fault_enter is given for a prepared statement of fixed text
 * (sql_fixed): build is NULL, text identifies it, and it counts as "stmt". */
#define FAULT_FIXED_STMT UINT32_MAX

/* The hooks (library side).  fault_enter: 1 if the call must not run,
 * with its code in *rc; may set *oom to make the call's own allocation
 * fail.  fault_leave: the code of a call that ran. */
RSV_HIDDEN void fault_opened(rsv_ctx *ctx);
RSV_HIDDEN int fault_enter(rsv_ctx *ctx, sql_builder build,
                           uint32_t shape, const char *text, int *oom,
                           int *rc);
RSV_HIDDEN int fault_leave(rsv_ctx *ctx, int rc);
/* For statements sent back to back (sql_text_pair), whose answers are
 * read after both went out: fault_leave_due says, right after the call's
 * fault_enter, whether it is to be lost after it runs (and forgets it);
 * fault_lose is that loss, applied once its answer was read. */
RSV_HIDDEN int fault_leave_due(rsv_ctx *ctx);
RSV_HIDDEN int fault_lose(rsv_ctx *ctx, int rc);
RSV_HIDDEN void fault_server(unsigned long *version, const char **info);
/* schema.c tells which builders are a procedure's CALL, and how each
 * answer says it committed: the trace shows them as "CALL" (a commit
 * point) and "CALL (rolled back)". */
RSV_HIDDEN void fault_call_kind(sql_builder build, int answer);

#define FAULT_OPENED(ctx) fault_opened(ctx)
#define FAULT_ENTER(ctx, build, shape, text, oom, rcp) \
    fault_enter(ctx, build, shape, text, oom, rcp)
#define FAULT_LEAVE(ctx, rc) fault_leave(ctx, rc)
#define FAULT_LEAVE_DUE(ctx) fault_leave_due(ctx)
#define FAULT_LOSE(ctx, rc) fault_lose(ctx, rc)
#define FAULT_SERVER(version, info) fault_server(version, info)
#define FAULT_CALL_KIND(build, answer) fault_call_kind(build, answer)

#else

#define FAULT_OPENED(ctx) ((void)(ctx))
#define FAULT_ENTER(ctx, build, shape, text, oom, rcp) ((void)(rcp), 0)
#define FAULT_LEAVE(ctx, rc) (rc)
#define FAULT_LEAVE_DUE(ctx) ((void)(ctx), 0)
#define FAULT_LOSE(ctx, rc) (rc)
#define FAULT_SERVER(version, info) ((void)(version), (void)(info))
#define FAULT_CALL_KIND(build, answer) ((void)(build), (void)(answer))

#endif /* RSV_FAULT_INJECTION */

#endif /* RSV_FAULT_H */
