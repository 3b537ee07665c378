/*
 * admin.h - what the files of rsv-admin share: the parsed command line,
 * a command's environment, the exit statuses, and the output, parsing and
 * statement helpers (rsv-admin.c), the Prometheus text writer (prom.c).
 * Each command lives in the file of its concern: rsv-admin.c (options,
 * connection, stock, checkouts, audit, schema), sweep.c, stats.c,
 * connections.c.
 */
#ifndef RSV_ADMIN_H
#define RSV_ADMIN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <mysql.h>
#include <reserve.h>

enum {
    EXIT_OKAY = 0,     /* done */
    EXIT_FOUND = 1,    /* audit violations, or no such item/checkout/shop */
    EXIT_ACTION = 1,   /* schema status: the schema needs something done */
    EXIT_USAGE = 2,    /* bad command line or argument value */
    EXIT_ERROR = 3,    /* connection, server or library failure */
    EXIT_REFUSED = 4   /* the checkout's state does not allow the change
                          (release of a claimed checkout, claim of a
                          claimed, released or expired one), or the
                          database's does not allow schema install or
                          upgrade (already installed, nothing installed,
                          newer than the file) */
};

typedef struct opts {
    const char *socket, *host, *user, *password, *database, *schema;
    const char *defaults_file; /* the option file read instead of the
                                  MariaDB defaults */
    const char *metrics_file;  /* Prometheus text written there (sweep,
                                  stats, connections) */
    const char *tag_prefix;    /* connections: the statement tag's prefix */
    const char *reason;        /* migrate set/percent: why (stored) */
    int64_t max_ttl_s;         /* migrate set primary: the old store's
                                  longest hold TTL, -1 = not given */
    const char *csv, *query;   /* import, migrate compare: the source */
    const char *redis, *pattern; /* migrate compare: HOST:PORT, the key
                                  pattern ("stock:{shop}:{item}:{location}") */
    int64_t settle_s;          /* migrate compare: seconds before a
                                  difference is checked again (-1: 2) */
    int64_t chunk, rate;       /* import: rows per chunk, rows per second
                                  (0: the defaults, no limit) */
    unsigned int port;
    int json, prometheus, all, hex, no_defaults, by_shop;
    int64_t max;
    int have_max;
    const char *pos[8];
    int npos;
} opts;

typedef struct cmd_env {
    const opts *o;
    MYSQL *conn;
    rsv_ctx *ctx;
    const char *const *args; /* after the command name */
    int nargs;
} cmd_env;

extern const char *const prog;

/* ---- output (rsv-admin.c) ---- */
void json_str(const void *p, size_t n);
void json_cstr(const char *s);
const char *code_name(int rc);
/* {"code":N,"name":"RSV_...","message":"..."} */
void json_error_obj(int rc, const char *msg);
/* The message of the last failing call on ctx, or the code's text. */
const char *lib_msg(rsv_ctx *ctx, int rc);
/* The exit status for a library code. */
int exit_for(int rc);
/* Report a library failure (stderr, and stdout with --json); returns the
 * exit status for it. */
int lib_fail(const opts *o, rsv_ctx *ctx, const char *what, int rc);
/* Report a failed statement of the tool's own; returns EXIT_ERROR. */
int db_fail(const opts *o, MYSQL *conn, const char *what);
/* "rsv-admin: WHAT 'ARG' (see rsv-admin --help)"; returns EXIT_USAGE. */
int usage_fail(const char *what, const char *arg);
void print_key_json(const uint64_t *k, int n);

/* ---- arguments (rsv-admin.c) ---- */
int parse_u64(const char *s, uint64_t *out);
int parse_i64(const char *s, int64_t *out);
/* The SHOP ITEM LOCATION arguments (as many as n). */
int ids(const cmd_env *e, int n, uint64_t *v);
/* audit, sweep and stats: "SHOP" or "--all", exactly one of them. */
int shop_or_all(const cmd_env *e, const char *cmd, uint64_t *shop);
/* Is `name` one of the space-separated words of `list`? */
int one_of(const char *name, const char *list);

/* ---- statements of the tool's own (rsv-admin.c) ---- */
/* Send one statement; 0 or -1 (the caller reports). */
int sql(const cmd_env *e, const char *q);
/* End a transaction of the tool's own (AND NO CHAIN NO RELEASE). */
void end_txn(const cmd_env *e, int commit);
/* The rows of a query; NULL with the error left on the connection. */
MYSQL_RES *query_rows(MYSQL *c, const char *q);

/* ---- the commands in files of their own ---- */
int cmd_sweep(const cmd_env *e);       /* sweep.c */
/* sweep --metrics-file when no connection could be made: the failed run
 * is recorded too. */
void sweep_connect_failed(const opts *o);
int cmd_stats(const cmd_env *e);       /* stats.c */
int cmd_connections(const cmd_env *e); /* connections.c */
int cmd_migrate(const cmd_env *e);     /* migrate.c */
int cmd_import(const cmd_env *e);      /* import.c */

/* ---- stock levels from another store (import.c; compare.c uses them) ---- */
typedef struct level {
    uint64_t shop, item, loc;
    int64_t on_hand;   /* import: on hand; compare: available */
    uint64_t line;     /* in the source (row number of a query) */
} level;
typedef struct levels {
    level *v;
    size_t n, cap;
    uint64_t bad;      /* rows refused (printed with their line) */
} levels;
int levels_push(levels *ls, const level *l);
void levels_bad_row(levels *ls, uint64_t line, const char *why,
                    const char *text);
/* Rows of shop_id, item_id, location_id, level: 0, or -1 / an exit status
 * after reporting. */
int levels_read_csv(const char *path, levels *ls);
int levels_read_query(const cmd_env *e, const char *q, levels *ls);
/* Counts (and prints) every key that is there twice as bad. */
void levels_check_duplicates(levels *ls);
uint32_t crc32_of(const char *s);
double mono_s(void);
void pause_s(double s);
int cmd_migrate_compare(const cmd_env *e); /* compare.c */

/* ---- Prometheus text (prom.c) ---- */
/* Where a command's Prometheus text goes: stdout, or (--metrics-file) a
 * temporary file beside the named one, renamed over it by prom_close once
 * complete, so a collector never reads half a file. */
typedef struct prom_out {
    FILE *f;
    char tmp[4096];
    const char *path; /* NULL: stdout */
} prom_out;
/* 0, or EXIT_ERROR with the reason on stderr. */
int prom_open(prom_out *p, const char *path);
/* Finish: rename the file into place (or drop it when !ok).  0, or
 * EXIT_ERROR with the reason on stderr. */
int prom_close(prom_out *p, int ok);
/* "# HELP name help\n# TYPE name type\n" */
void prom_family(FILE *f, const char *name, const char *type,
                 const char *help);
/* A label value, quoted and escaped as the format wants. */
void prom_label_value(FILE *f, const char *v);

#endif
