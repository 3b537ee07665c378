/*
 * fuzz_util.h - shared by the libFuzzer targets in tests/fuzz: a reader
 * that decodes the fuzzer's bytes into integers (running out of input
 * reads zeros, so every input decodes), pickers for "interesting" values,
 * check(), which aborts so libFuzzer records the input as a crash, and
 * the context the pure targets validate their inputs with.
 */
#ifndef RSV_FUZZ_UTIL_H
#define RSV_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mysql.h>

#include "reserve.h"

typedef struct fz {
    const uint8_t *p;
    size_t n;
} fz;

static inline uint8_t fz_u8(fz *f)
{
    if (f->n == 0)
        return 0;
    f->n--;
    return *f->p++;
}

static inline uint64_t fz_bytes_u64(fz *f, int nbytes)
{
    uint64_t v = 0;
    for (int i = 0; i < nbytes; i++)
        v |= (uint64_t)fz_u8(f) << (8 * i);
    return v;
}

static inline uint32_t fz_u32(fz *f) { return (uint32_t)fz_bytes_u64(f, 4); }
static inline uint64_t fz_u64(fz *f) { return fz_bytes_u64(f, 8); }

/* An int64 that is usually a boundary value of the API, sometimes raw. */
static inline int64_t fz_i64_interesting(fz *f, int64_t lo, int64_t hi)
{
    uint8_t sel = fz_u8(f);
    switch (sel % 16) {
    case 0: return 0;
    case 1: return -1;
    case 2: return 1;
    case 3: return INT64_MIN;
    case 4: return INT64_MAX;
    case 5: return lo;
    case 6: return lo - 1;
    case 7: return hi;
    case 8: return hi + 1;
    case 9: return (int64_t)fz_u8(f);             /* small positive */
    case 10: return -(int64_t)fz_u8(f);           /* small negative */
    case 11: return INT32_MAX;
    case 12: return (int64_t)INT32_MAX + 1;
    default: return (int64_t)fz_u64(f);           /* anything */
    }
}

/* Print and abort: libFuzzer saves the input as a crash. */
#define check(cond, ...)                                                    \
    do {                                                                    \
        if (!(cond)) {                                                      \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__,          \
                    __LINE__, #cond);                                       \
            fprintf(stderr, __VA_ARGS__);                                   \
            fputc('\n', stderr);                                            \
            abort();                                                        \
        }                                                                   \
    } while (0)

#define check_rc(ctx, got, want)                                            \
    check((got) == (want), "got %d (%s), want %d (%s): %s", (got),          \
          rsv_code_name(got) ? rsv_code_name(got) : "?", (want),           \
          rsv_code_name(want) ? rsv_code_name(want) : "?",                  \
          rsv_errmsg(ctx))

/* The context of a pure target: on a handle that never connects,
 * rsv_open() validates the options, finds no connection and returns
 * RSV_ECONN, but still hands back the context, which every validating
 * entry point can use. */
static inline rsv_ctx *fz_unconnected_ctx(MYSQL **conn_out)
{
    MYSQL *conn = mysql_init(NULL);
    rsv_ctx *ctx = NULL;
    int rc = rsv_open(&ctx, conn, NULL);
    check(rc == RSV_ECONN && ctx, "rsv_open on a handle never connected "
                                  "gave %d", rc);
    *conn_out = conn;
    return ctx;
}

/* The message of a context is a NUL-terminated string inside its buffer
 * (the buffer is 512 bytes in lib/internal.h; the API promises a string). */
static inline void check_msg(const rsv_ctx *ctx)
{
    const char *m = rsv_errmsg(ctx);
    check(m != NULL, "rsv_errmsg returned NULL");
    check(memchr(m, '\0', 512) != NULL, "message not terminated");
}

#endif
