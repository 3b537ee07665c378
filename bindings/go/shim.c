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

#define RSVGO_FORWARD(ret, name, params, args) \
    ret go_##name params { return p_##name args; }
#define RSVGO_FORWARD_VOID(name, params, args) \
    void go_##name params { p_##name args; }
RSVGO_FUNCS(RSVGO_FORWARD)
RSVGO_VOIDS(RSVGO_FORWARD_VOID)

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
    return 0;
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
