/*
 * shim.c - loads libreserve with dlopen() and forwards each go_NAME to the
 * library's NAME (see shim.h).
 */
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>

#include "shim.h"
#include "_cgo_export.h"

#define RSVGO_POINTER(ret, name, params, args) static ret (*p_##name) params;
#define RSVGO_POINTER_VOID(name, params, args) static void (*p_##name) params;
RSVGO_FUNCS(RSVGO_POINTER)
RSVGO_VOIDS(RSVGO_POINTER_VOID)
RSVGO_MIGRATE_FUNCS(RSVGO_POINTER)
RSVGO_MIGRATE_VOIDS(RSVGO_POINTER_VOID)

#define RSVGO_FORWARD(ret, name, params, args) \
    ret go_##name params { return p_##name args; }
#define RSVGO_FORWARD_VOID(name, params, args) \
    void go_##name params { p_##name args; }
RSVGO_FUNCS(RSVGO_FORWARD)
RSVGO_VOIDS(RSVGO_FORWARD_VOID)
RSVGO_MIGRATE_FUNCS(RSVGO_FORWARD)
RSVGO_MIGRATE_VOIDS(RSVGO_FORWARD_VOID)

static const char *migrate_missing = "rsv_migrate_open";

int rsvgo_load(const char *path, char *err, size_t errlen)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(err, errlen, "%s", dlerror());
        return -1;
    }
    void *sym;
#define RSVGO_RESOLVE(name)                                                 \
    if (!(sym = dlsym(h, #name))) {                                         \
        snprintf(err, errlen, "%s: no symbol %s (a libreserve older than "  \
                 "this package?)", path, #name);                            \
        dlclose(h);                                                         \
        return -1;                                                          \
    }                                                                       \
    *(void **)&p_##name = sym;
#define RSVGO_RESOLVE_FN(ret, name, params, args) RSVGO_RESOLVE(name)
#define RSVGO_RESOLVE_VOID(name, params, args) RSVGO_RESOLVE(name)
    RSVGO_FUNCS(RSVGO_RESOLVE_FN)
    RSVGO_VOIDS(RSVGO_RESOLVE_VOID)
    /* optional: a library older than the migration handle loads, and
     * rsvgo_migrate_missing() names what it lacks */
    migrate_missing = NULL;
#define RSVGO_OPTIONAL(name)                                                \
    if (!migrate_missing && !(*(void **)&p_##name = dlsym(h, #name)))       \
        migrate_missing = #name;
#define RSVGO_OPTIONAL_FN(ret, name, params, args) RSVGO_OPTIONAL(name)
#define RSVGO_OPTIONAL_VOID(name, params, args) RSVGO_OPTIONAL(name)
    RSVGO_MIGRATE_FUNCS(RSVGO_OPTIONAL_FN)
    RSVGO_MIGRATE_VOIDS(RSVGO_OPTIONAL_VOID)
    return 0;
}

const char *rsvgo_migrate_missing(void)
{
    return migrate_missing;
}

static void audit_cb(void *arg, uint64_t shop, uint64_t item, uint64_t loc,
                     const char *problem)
{
    rsvgoAuditViolation((uintptr_t)arg, shop, item, loc, (char *)problem);
}

int rsvgo_audit(rsv_ctx *c, uint64_t shop, int all, uintptr_t handle)
{
    return p_rsv_audit(c, shop, all, audit_cb, (void *)handle, NULL);
}

int rsvgo_wait(int fd, int timeout_ms)
{
    struct pollfd p = {fd, POLLIN, 0};
    int n = poll(&p, 1, timeout_ms);
    if (n < 0)
        return errno == EINTR ? 0 : -1;
    return n > 0;
}

/* Non-zero while rsvgo_migrate_call runs on this thread: a call of the old
 * store made here answers the caller (stages old and shadow); one made on
 * the handle's own thread (primary) finds 0. */
static _Thread_local uintptr_t caller_call;

static int legacy_cb(void *user, uint32_t op, uint64_t shop, const void *t,
                     size_t tl, uint64_t item, uint64_t loc, int64_t q,
                     int64_t ttl)
{
    return rsvgoLegacy((uintptr_t)user, caller_call, op, shop, (void *)t, tl,
                       item, loc, q, ttl);
}

int rsvgo_migrate_set_legacy(rsv_migration *m, uintptr_t handle, int on)
{
    return p_rsv_migrate_set_legacy(m, on ? legacy_cb : NULL,
                                    on ? (void *)handle : NULL);
}

int rsvgo_migrate_call(rsv_migration *m, uint32_t op, uint64_t shop,
                       const void *t, size_t tl, uint64_t item, uint64_t loc,
                       int64_t q, int64_t ttl, uintptr_t call)
{
    int rc;
    caller_call = call;
    if (op == RSV_OP_RESERVE)
        rc = p_rsv_migrate_reserve_one(m, shop, t, tl, item, loc, q, ttl);
    else if (op == RSV_OP_CLAIM)
        rc = p_rsv_migrate_claim(m, shop, t, tl);
    else
        rc = p_rsv_migrate_release(m, shop, t, tl);
    caller_call = 0;
    return rc;
}
