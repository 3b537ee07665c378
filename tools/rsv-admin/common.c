/*
 * common.c - what every command of rsv-admin shares: JSON output, the
 * library's codes as exit codes and messages, argument parsing, and the
 * SQL helpers of the commands that read the tables themselves.  Commands
 * (rsv-admin.c, sweep.c, stats.c, connections.c) call it; it calls none
 * of them.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <reserve.h>

#include "admin.h"

const char *const prog = "rsv-admin";

/* The result of a query of the tool's own; NULL with the error left
 * on the connection.  The caller frees the result. */
MYSQL_RES *query_rows(MYSQL *c, const char *q)
{
    if (mysql_real_query(c, q, strlen(q)) != 0)
        return NULL;
    return mysql_store_result(c);
}

void json_str(const void *p, size_t n)
{
    const unsigned char *s = p;
    putchar('"');
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = s[i];
        switch (ch) {
        case '"': fputs("\\\"", stdout); break;
        case '\\': fputs("\\\\", stdout); break;
        case '\n': fputs("\\n", stdout); break;
        case '\r': fputs("\\r", stdout); break;
        case '\t': fputs("\\t", stdout); break;
        default:
            /* Control bytes and bytes >= 0x80 (tokens are bytes, not
             * necessarily UTF-8) are escaped, so the output is always
             * valid JSON. */
            if (ch < 0x20 || ch >= 0x7f)
                printf("\\u%04x", ch);
            else
                putchar(ch);
        }
    }
    putchar('"');
}

void json_cstr(const char *s) { json_str(s, strlen(s)); }

const char *code_name(int rc)
{
    const char *n = rsv_code_name(rc);
    return n ? n : "RSV_E?";
}

/* {"code":N,"name":"RSV_...","message":"..."} */
void json_error_obj(int rc, const char *msg)
{
    printf("{\"code\":%d,\"name\":", rc);
    json_cstr(code_name(rc));
    printf(",\"message\":");
    json_cstr(msg);
    putchar('}');
}

/* The message of the last failing call on ctx, or the code's text. */
const char *lib_msg(rsv_ctx *ctx, int rc)
{
    const char *msg = ctx ? rsv_errmsg(ctx) : "";
    return msg && *msg ? msg : rsv_strerror(rc);
}

/* The exit status for a library code. */
int exit_for(int rc)
{
    switch (rc) {
    case RSV_OK:
        return EXIT_OKAY;
    case RSV_ENOITEM:
    case RSV_ENOTFOUND:
        return EXIT_FOUND;
    case RSV_EINVAL:
    case RSV_EQUANTITY:
    case RSV_ETOKEN:
        return EXIT_USAGE;
    case RSV_ECLAIMED:
    case RSV_ERELEASED:
    case RSV_EEXPIRED:
        return EXIT_REFUSED;
    default:
        return EXIT_ERROR;
    }
}

/* Report a library failure on stderr (and on stdout with --json); returns
 * the exit status for it. */
int lib_fail(const opts *o, rsv_ctx *ctx, const char *what, int rc)
{
    const char *msg = lib_msg(ctx, rc);
    fprintf(stderr, "%s: %s: %s: %s\n", prog, what, code_name(rc), msg);
    if (o->json) {
        printf("{\"error\":");
        json_error_obj(rc, msg);
        printf("}\n");
    }
    return exit_for(rc);
}

/* Report a failed statement of the tool's own (stderr, and an RSV_EDB
 * error document with --json); returns EXIT_ERROR. */
int db_fail(const opts *o, MYSQL *conn, const char *what)
{
    char msg[600];
    snprintf(msg, sizeof msg, "%s (MySQL error %u)", mysql_error(conn),
             mysql_errno(conn));
    fprintf(stderr, "%s: %s: %s\n", prog, what, msg);
    if (o->json) {
        printf("{\"error\":");
        json_error_obj(RSV_EDB, msg);
        printf("}\n");
    }
    return EXIT_ERROR;
}

/* "rsv-admin: WHAT 'ARG' (see rsv-admin --help)"; arg may be NULL. */
int usage_fail(const char *what, const char *arg)
{
    if (arg)
        fprintf(stderr, "%s: %s '%s' (see %s --help)\n", prog, what, arg,
                prog);
    else
        fprintf(stderr, "%s: %s (see %s --help)\n", prog, what, prog);
    return EXIT_USAGE;
}

int parse_u64(const char *s, uint64_t *out)
{
    if (!s || !*s || *s < '0' || *s > '9')
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || errno)
        return -1;
    *out = v;
    return 0;
}

int parse_i64(const char *s, int64_t *out)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*end || errno)
        return -1;
    *out = v;
    return 0;
}

/* Parse the SHOP ITEM LOCATION arguments (as many as n). */
int ids(const cmd_env *e, int n, uint64_t *v)
{
    static const char *what[] = {"bad shop id", "bad item id",
                                 "bad location id"};
    for (int i = 0; i < n; i++)
        if (parse_u64(e->args[i], &v[i]))
            return usage_fail(what[i], e->args[i]);
    return 0;
}

/* audit, sweep and stats: "SHOP" or "--all", exactly one of them. */
int shop_or_all(const cmd_env *e, const char *cmd, uint64_t *shop)
{
    char m[64];
    *shop = 0;
    if (e->o->all && e->nargs > 0) {
        snprintf(m, sizeof m, "%s: give a SHOP or --all, not both", cmd);
        return usage_fail(m, NULL);
    }
    if (e->o->all)
        return 0;
    if (e->nargs != 1) {
        snprintf(m, sizeof m, "%s needs a SHOP or --all", cmd);
        return usage_fail(m, NULL);
    }
    return ids(e, 1, shop);
}

/* Send one statement of the tool's own; 0 or -1 (the caller reports). */
int sql(const cmd_env *e, const char *q)
{
    return mysql_real_query(e->conn, q, strlen(q)) == 0 ? 0 : -1;
}

/* End a transaction of the tool's own the way the library ends its
 * transactions: AND NO CHAIN NO RELEASE, so a completion_type set on the
 * connection (an option file's init-command) neither opens the next one
 * nor drops the connection. */
void end_txn(const cmd_env *e, int commit)
{
    (void)sql(e, commit ? "COMMIT AND NO CHAIN NO RELEASE"
                        : "ROLLBACK AND NO CHAIN NO RELEASE");
}

void print_key_json(const uint64_t *k, int n)
{
    static const char *names[] = {"shop_id", "item_id", "location_id"};
    for (int i = 0; i < n; i++)
        printf("%s\"%s\":%" PRIu64, i ? "," : "", names[i], k[i]);
}

/* Is `name` one of the space-separated words of `list`? */
int one_of(const char *name, const char *list)
{
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        size_t w = strcspn(p, " ");
        if (w == n && strncmp(p, name, n) == 0)
            return 1;
        p += w;
        p += strspn(p, " ");
    }
    return 0;
}
