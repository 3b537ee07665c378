/*
 * fuzz_options.c - libFuzzer target for rsv_options_init() and the
 * validation of rsv_options.
 *
 * Decision: validation (apply_options() in lib/context.c) is the first
 * thing rsv_open() does, before it looks at the connection.  So the target
 * calls the public rsv_open() on a handle that never connected: invalid
 * options give RSV_EINVAL, valid ones get as far as the connection check
 * and give RSV_ECONN.  No refactor and no internal symbol is needed (see
 * docs/testing.md for the one thing this cannot see: what the resolved
 * options look like inside the context).
 *
 * The oracle is written from include/reserve.h, plus the ranges the
 * library enforces but the header does not state (hold_ttl_ms 1..30 days,
 * max_retries 0..100, retry_base_us 1..1000000, settled_retention_s >= 0),
 * which are marked below.
 */
#include <stdint.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>

#include "fuzz_util.h"
#include "../../lib/test_flags.h"

static MYSQL *conn;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    conn = mysql_init(NULL);
    if (!conn)
        abort();
    return 0;
}

static int tag_ok(const char *p)
{
    size_t n = strlen(p);
    if (n > 32)
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '_' || c == ':' || c == '.' ||
              c == '-'))
            return 0;
    }
    return 1;
}

static unsigned int pick_version(fz *f)
{
    uint8_t s = fz_u8(f);
    switch (s % 6) {
    case 0: return 0;
    case 1: return RSV_OPTIONS_VERSION + 1;
    case 2: return UINT32_MAX;
    case 3: return fz_u32(f);
    default: return RSV_OPTIONS_VERSION;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz f = {data, size};
    rsv_options o;
    memset(&o, 0xA5, sizeof o);
    unsigned int v = pick_version(&f);
    int rc = rsv_options_init(&o, v);
    if (v == 0 || v > RSV_OPTIONS_VERSION) {
        check(rc == RSV_EINVAL, "options_init(%u) = %d", v, rc);
    } else {
        check(rc == RSV_OK, "options_init(%u) = %d", v, rc);
        check(o.version == v && o.flags == 0 && o.pool_cap == 1000 &&
                  o.refill_low_water == -1 && o.hold_ttl_ms == 600000 &&
                  o.max_retries == 8 && o.retry_base_us == 2000 &&
                  o.lock_wait_timeout_s == 0 && o.conn_tag_prefix == NULL &&
                  o.settled_retention_s == 604800,
              "defaults");
        {
            check(o.pool_idle_s == 3600 && o.call_timeout_ms == 5000 &&
                      o.stmt_cache_max == 48,
                  "default pool_idle_s, call_timeout_ms, stmt_cache_max");
        }
    }
    check(rsv_options_init(NULL, RSV_OPTIONS_VERSION) == RSV_EINVAL,
          "options_init(NULL)");
    check(rsv_options_size() == sizeof(rsv_options), "options_size");
    if (rc != RSV_OK)
        rsv_options_init(&o, RSV_OPTIONS_VERSION);

    /* Change some fields: a bit per field says whether it changes. */
    uint16_t which = (uint16_t)fz_bytes_u64(&f, 2);
    char tag[80];
    if (which & 0x001) o.version = pick_version(&f);
    if (which & 0x002) {
        uint8_t s = fz_u8(&f);
        o.flags = s % 3 == 0 ? fz_u32(&f) : (uint32_t)(s % 4);
    }
    if (which & 0x004) o.pool_cap = fz_i64_interesting(&f, 1, 10000);
    if (which & 0x008) {
        uint8_t s = fz_u8(&f);
        o.refill_low_water = s % 4 == 0 ? o.pool_cap
                           : s % 4 == 1 ? (o.pool_cap < INT64_MAX ? o.pool_cap + 1 : 0)
                           : fz_i64_interesting(&f, -1, 10000);
    }
    if (which & 0x010)
        o.hold_ttl_ms = fz_i64_interesting(&f, 1, 30LL * 24 * 3600 * 1000);
    if (which & 0x020)
        o.max_retries = (int32_t)fz_i64_interesting(&f, 0, 100);
    if (which & 0x040)
        o.retry_base_us = (int32_t)fz_i64_interesting(&f, 1, 1000000);
    if (which & 0x080)
        o.lock_wait_timeout_s = (int32_t)fz_i64_interesting(&f, 0, 3600);
    if (which & 0x100)
        o.settled_retention_s = fz_i64_interesting(&f, 0, INT64_MAX - 1);
    if (which & 0x400)
        o.pool_idle_s = fz_i64_interesting(&f, 0, 30LL * 24 * 3600);
    if (which & 0x800)
        o.call_timeout_ms = fz_i64_interesting(&f, 0, 3600 * 1000);
    if (which & 0x1000)
        o.stmt_cache_max = (int32_t)fz_i64_interesting(&f, 1, 48);
    if (which & 0x200) {
        size_t n = fz_u8(&f) % 48;
        for (size_t i = 0; i < n; i++) {
            uint8_t c = fz_u8(&f);
            tag[i] = (char)(c ? c : 'a');
        }
        tag[n] = '\0';
        o.conn_tag_prefix = tag;
    }

    /* (pool_cap * 3 only for a pool_cap the library accepts: any other
     * makes the options invalid anyway, and could overflow) */
    int64_t lw = o.refill_low_water != -1 ? o.refill_low_water
                 : o.pool_cap >= 1 && o.pool_cap <= 10000 ? o.pool_cap * 3 / 4
                                                          : 0;
    int valid =
        o.version >= 1 && o.version <= RSV_OPTIONS_VERSION &&
        !(o.flags & ~(RSV_OPT_NO_PROACTIVE_REFILL | RSV_OPT_REPLICA_ACK |
                      TEST_OPT_READ_FROM_BOTTOM |
                      TEST_OPT_STATEMENTS_ONLY)) &&
        o.pool_cap >= 1 && o.pool_cap <= 10000 &&
        lw >= 0 && lw <= o.pool_cap &&
        /* in the header since the fuzzer found them missing: */
        o.hold_ttl_ms >= 1 && o.hold_ttl_ms <= 30LL * 24 * 3600 * 1000 &&
        o.max_retries >= 0 && o.max_retries <= 100 &&
        o.retry_base_us >= 1 && o.retry_base_us <= 1000000 &&
        o.settled_retention_s >= 0 &&
        o.pool_idle_s >= 0 && o.pool_idle_s <= 30LL * 24 * 3600 &&
        o.call_timeout_ms >= 0 && o.call_timeout_ms <= 3600 * 1000 &&
        o.stmt_cache_max >= 1 && o.stmt_cache_max <= 48 &&
        /* in the header: */
        o.lock_wait_timeout_s >= 0 && o.lock_wait_timeout_s <= 3600 &&
        (!o.conn_tag_prefix || tag_ok(o.conn_tag_prefix));

    rsv_options copy = o;
    rsv_ctx *ctx = NULL;
    rc = rsv_open(&ctx, conn, (which & 0x8000) ? NULL : &o);
    int want = (which & 0x8000) || valid ? RSV_ECONN : RSV_EINVAL;
    check(ctx != NULL, "no context back from rsv_open (%d)", rc);
    check_rc(ctx, rc, want);
    check_msg(ctx);
    check(memcmp(&copy, &o, sizeof o) == 0, "rsv_open changed the options");
    rsv_close(ctx);

    ctx = (rsv_ctx *)1;
    check(rsv_open(&ctx, NULL, &o) == RSV_EINVAL && ctx == NULL,
          "rsv_open(NULL conn)");
    check(rsv_open(NULL, conn, &o) == RSV_EINVAL, "rsv_open(NULL out)");
    return 0;
}
