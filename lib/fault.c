/*
 * fault.c - the fault-injection hooks of the test-only build; see fault.h.
 * Compiled to nothing in the production library.
 */
#include "fault.h"

#ifdef RSV_FAULT_INJECTION

#include <string.h>
#include <sys/socket.h>

#include <errmsg.h>
#include <mysqld_error.h>

#define TRACE_MAX 1024

static struct {
    rsv_ctx *ctx;
    int follow_next_open;
    uint64_t calls, nth;
    int kind, fired, leave;
    /* the statement an *_ALWAYS fault sticks to */
    int sticky;
    sql_builder s_build;
    sql_builder last_build; /* of the last call entered */
    uint32_t s_shape;
    const char *s_text;
    const char *trace[TRACE_MAX];
} F;

void rsv__fault_arm(rsv_ctx *ctx, uint64_t nth_call, int kind)
{
    memset(&F, 0, sizeof F);
    F.ctx = ctx;
    F.follow_next_open = ctx == NULL;
    F.nth = nth_call;
    F.kind = kind;
}

void rsv__fault_disarm(void)
{
    F.kind = RSV_FAULT_NONE;
    F.sticky = 0;
    F.leave = 0;
}

uint64_t rsv__fault_calls(const rsv_ctx *ctx)
{
    return !ctx || ctx == F.ctx ? F.calls : 0;
}

int rsv__fault_fired(void) { return F.fired; }

const char *rsv__fault_call(uint64_t i)
{
    return i >= 1 && i <= F.calls && i <= TRACE_MAX ? F.trace[i - 1] : NULL;
}

void rsv__fault_keep_thread_id(rsv_ctx *ctx, unsigned long thread_id)
{
    ctx->thread_id = thread_id;
}

static unsigned long pretend_version;
static const char *pretend_info;

void rsv__fault_pretend_server(unsigned long version, const char *info)
{
    pretend_version = version;
    pretend_info = info;
}

void fault_server(unsigned long *version, const char **info)
{
    if (pretend_version) {
        *version = pretend_version;
        *info = pretend_info;
    }
}

const char *rsv__fault_kind_name(int kind)
{
    static const char *names[RSV_FAULT__COUNT] = {
        "none", "deadlock", "lockwait", "deadlock-always",
        "lockwait-always", "gone", "lost", "lost-after", "oom"};
    return kind >= 0 && kind < RSV_FAULT__COUNT ? names[kind] : "?";
}

void fault_opened(rsv_ctx *ctx)
{
    if (F.follow_next_open) {
        F.ctx = ctx;
        F.follow_next_open = 0;
    }
}

/* A real loss, not only an error code: the socket is shut down, so every
 * later call on the handle fails as it would after a network failure, and
 * the server ends the session (rolling back its transaction).  The ping
 * (not counted) meets the dead socket the way the failed call would have,
 * so the handle's own state (server status, error) is what a real loss
 * leaves behind, not the last OK packet's. */
static void kill_socket(rsv_ctx *ctx)
{
    my_socket fd = mysql_get_socket(ctx->conn);
    if (fd >= 0) {
        shutdown(fd, SHUT_RDWR);
        (void)mysql_ping(ctx->conn);
    }
}

/* The procedures' CALLs, as schema.c names them (fault_call_kind), with
 * how each answer says it committed.  Told at every rsv_open, maybe on
 * several threads at once: under a lock. */
static pthread_mutex_t calls_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    sql_builder build;
    int answer;
} calls[16];
static size_t ncalls;

void fault_call_kind(sql_builder build, int answer)
{
    pthread_mutex_lock(&calls_mu);
    size_t i = 0;
    while (i < ncalls && calls[i].build != build)
        i++;
    if (i < sizeof calls / sizeof calls[0]) {
        calls[i].build = build;
        calls[i].answer = answer;
        if (i == ncalls)
            ncalls++;
    }
    pthread_mutex_unlock(&calls_mu);
}

/* FAULT_ANSWER_*, or -1 if build is no procedure's CALL. */
static int call_answer(sql_builder build)
{
    int answer = -1;
    pthread_mutex_lock(&calls_mu);
    for (size_t i = 0; i < ncalls; i++)
        if (calls[i].build == build)
            answer = calls[i].answer;
    pthread_mutex_unlock(&calls_mu);
    return answer;
}

static int same_call(sql_builder build, uint32_t shape, const char *text)
{
    if (build || F.s_build)
        return build == F.s_build && shape == F.s_shape;
    return text && F.s_text && strcmp(text, F.s_text) == 0;
}

int fault_enter(rsv_ctx *ctx, sql_builder build, uint32_t shape,
                const char *text, int *oom, int *rc)
{
    if (!ctx || ctx != F.ctx)
        return 0;
    uint64_t n = ++F.calls;
    if (n <= TRACE_MAX)
        F.trace[n - 1] = build && call_answer(build) >= 0
                             ? "CALL"
                         : build || shape == FAULT_FIXED_STMT ? "stmt"
                         : text  ? text
                                 : "query";
    F.last_build = build;
    F.leave = 0;
    if (F.kind == RSV_FAULT_NONE ||
        !(n == F.nth || (F.sticky && same_call(build, shape, text))))
        return 0;
    F.fired++;
    const char *what = build ? "execute" : text ? text : "server check";
    switch (F.kind) {
    case RSV_FAULT_DEADLOCK_ALWAYS:
    case RSV_FAULT_LOCKWAIT_ALWAYS:
        F.sticky = 1;
        F.s_build = build;
        F.s_shape = shape;
        F.s_text = text;
        /* fall through */
    case RSV_FAULT_DEADLOCK:
    case RSV_FAULT_LOCKWAIT:
        if (F.kind == RSV_FAULT_DEADLOCK || F.kind == RSV_FAULT_DEADLOCK_ALWAYS)
            *rc = ctx_db_fail(ctx, ER_LOCK_DEADLOCK,
                              "Deadlock found when trying to get lock; try "
                              "restarting transaction (injected)", what);
        else
            *rc = ctx_db_fail(ctx, ER_LOCK_WAIT_TIMEOUT,
                              "Lock wait timeout exceeded; try restarting "
                              "transaction (injected)", what);
        return 1;
    case RSV_FAULT_GONE:
        kill_socket(ctx);
        *rc = ctx_db_fail(ctx, CR_SERVER_GONE_ERROR,
                          "Server has gone away (injected)", what);
        return 1;
    case RSV_FAULT_LOST:
        kill_socket(ctx);
        return 0;
    case RSV_FAULT_LOST_AFTER:
        F.leave = 1;
        return 0;
    case RSV_FAULT_OOM:
        if (oom) {
            *oom = 1;
            return 0;
        }
        *rc = ctx_fail(ctx, RSV_ENOMEM, "out of memory (injected)");
        return 1;
    default:
        return 0;
    }
}

int fault_leave(rsv_ctx *ctx, int rc)
{
    if (!ctx || ctx != F.ctx)
        return rc;
    /* The walk must know whether the reserve procedure committed: what
     * follows a committed CALL is best-effort refill, what follows one
     * that rolled back is the statement path. */
    uint64_t n = F.calls;
    /* (a reserve procedure's last answer row carries the status, 0:
     * committed; the settle procedure's column 4 what it did, > 0:
     * committed) */
    const sql_res *r = &ctx->res;
    /* (a batch procedure always commits: its rows are per entry) */
    int answer = call_answer(F.last_build);
    int committed =
        rc == RSV_OK && r->rows >= 1 &&
        (answer == FAULT_ANSWER_BATCH  ? 1
         : answer == FAULT_ANSWER_DONE ? RES_I(r, r->rows - 1, 4) > 0
                                       : RES_I(r, r->rows - 1, 0) == 0);
    if (n >= 1 && n <= TRACE_MAX && strcmp(F.trace[n - 1], "CALL") == 0 &&
        !committed)
        F.trace[n - 1] = "CALL (rolled back)";
    return fault_leave_due(ctx) ? fault_lose(ctx, rc) : rc;
}

int fault_leave_due(rsv_ctx *ctx)
{
    if (!ctx || ctx != F.ctx || !F.leave)
        return 0;
    F.leave = 0;
    return 1;
}

int fault_lose(rsv_ctx *ctx, int rc)
{
    kill_socket(ctx);
    if (rc != RSV_OK)
        return rc;
    return ctx_db_fail(ctx, CR_SERVER_LOST,
                       "Lost connection to server during query (injected "
                       "after the call ran)", "reply");
}

#else

/* ISO C wants at least one declaration in a translation unit. */
typedef int rsv_fault_unused;

#endif /* RSV_FAULT_INJECTION */
