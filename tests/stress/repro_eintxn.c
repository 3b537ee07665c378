/*
 * repro_eintxn.c - reproducer: a connection lost during the COMMIT of the
 * refill a reserve runs after its own commit (reserve_refill_ahead) makes
 * rsv_reserve return RSV_OK, and every later call on the context returns
 * RSV_EINTXN ("inside a transaction") forever instead of RSV_ECONN: the
 * client-side server status still has SERVER_STATUS_IN_TRANS from the
 * refill's START TRANSACTION, and txn_caller_open() trusts it without a
 * round trip.
 *
 * Usage: repro_eintxn SOCKET CUTPROXY   (a server with the schema loaded
 * in database "stress", empty).  Exits 1 when the bug shows, 0 when the
 * situation arose and the library answered RSV_ECONN, 3 if the cut never
 * landed on a refill's COMMIT (inconclusive).
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mysql.h>
#include <reserve.h>

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: repro_eintxn SOCKET CUTPROXY\n");
        return 2;
    }
    int in[2], out[2];
    if (pipe(in) || pipe(out))
        return 2;
    pid_t p = fork();
    if (p == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        execl(argv[2], argv[2], "--unix", argv[1], (char *)NULL);
        _exit(127);
    }
    FILE *pin = fdopen(in[1], "w"), *pout = fdopen(out[0], "r");
    int port = 0;
    if (fscanf(pout, "%d", &port) != 1)
        return 2;

    rsv_options o;
    rsv_options_init(&o, RSV_OPTIONS_VERSION);
    o.pool_cap = 4;
    o.refill_low_water = 2;
    MYSQL *db = NULL;
    rsv_ctx *ctx = NULL;
    int bug = 0, seen = 0, rc = RSV_ECONN;
    char tok[32];
    /* Each round: arm "cut the second COMMIT from now", reserve one unit.
     * With a pool of 4 and a low-water mark of 2, reserves are often
     * followed by a refill in its own transaction; when the cut lands on
     * that refill's COMMIT the reserve returns RSV_OK on a connection that
     * is gone, and the next call must say RSV_ECONN. */
    for (int i = 0; i < 400 && !seen; i++) {
        if (rc == RSV_ECONN || rc == RSV_EINDOUBT) {
            rsv_close(ctx);
            if (db)
                mysql_close(db);
            db = mysql_init(NULL);
            if (!mysql_real_connect(db, "127.0.0.1", "root", NULL, "stress",
                                    (unsigned)port, NULL, 0)) {
                fprintf(stderr, "%s\n", mysql_error(db));
                return 2;
            }
            if (rsv_open(&ctx, db, &o) != RSV_OK) {
                fprintf(stderr, "rsv_open: %s\n", rsv_errmsg(ctx));
                return 2;
            }
            if (i == 0 && rsv_stock_set(ctx, 1, 1, 1, 100000) != RSV_OK) {
                fprintf(stderr, "stock: %s\n", rsv_errmsg(ctx));
                return 2;
            }
        }
        fputs("c 2\n", pin);
        fflush(pin);
        snprintf(tok, sizeof tok, "t%d", i);
        rc = rsv_reserve_one(ctx, 1, tok, strlen(tok), 1, 1, 1, 0);
        if (rc == RSV_OK && mysql_get_socket(db) == MARIADB_INVALID_SOCKET) {
            seen = 1;
            printf("reserve %s -> RSV_OK, but the connection is gone (the "
                   "refill's COMMIT was cut)\n", tok);
            snprintf(tok, sizeof tok, "t%d-next", i);
            rc = rsv_reserve_one(ctx, 1, tok, strlen(tok), 1, 1, 1, 0);
            printf("next reserve -> %s (%s)\n", rsv_code_name(rc),
                   rsv_errmsg(ctx));
            bug = rc == RSV_EINTXN;
        }
        fputs("x\n", pin); /* disarm what is left */
        fflush(pin);
        usleep(20000);
    }
    if (!seen)
        printf("never saw a refill COMMIT cut (inconclusive)\n");
    else
        printf("%s\n", bug ? "BUG: RSV_EINTXN on a dead connection after "
                              "a successful reserve (expected RSV_ECONN)"
                            : "no bug: RSV_ECONN as it should be");
    fclose(pin);
    kill(p, SIGTERM);
    return bug ? 1 : seen ? 0 : 3;
}
