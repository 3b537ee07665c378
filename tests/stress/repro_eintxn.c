/*
 * repro_eintxn.c - reproducer: a connection lost during the COMMIT of the
 * refill a reserve runs after its own commit (refill_ahead) makes
 * rsv_reserve return RSV_OK, and every later call on the context returns
 * RSV_EINTXN ("inside a transaction") forever instead of RSV_ECONN: the
 * client-side server status still has SERVER_STATUS_IN_TRANS from the
 * refill's START TRANSACTION, and txn_caller_open() trusts it without a
 * round trip.
 *
 * Usage: repro_eintxn SOCKET CUTPROXY   (a server with the schema loaded
 * in database "stress", empty).  Exits 1 when the bug shows.
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

    MYSQL *db = mysql_init(NULL);
    if (!mysql_real_connect(db, "127.0.0.1", "root", NULL, "stress",
                            (unsigned)port, NULL, 0)) {
        fprintf(stderr, "%s\n", mysql_error(db));
        return 2;
    }
    rsv_options o;
    rsv_options_init(&o, RSV_OPTIONS_VERSION);
    o.pool_cap = 4;
    o.refill_low_water = 2;
    rsv_ctx *ctx = NULL;
    if (rsv_open(&ctx, db, &o) != RSV_OK) {
        fprintf(stderr, "rsv_open: %s\n", rsv_errmsg(ctx));
        return 2;
    }
    int rc = rsv_stock_set(ctx, 1, 1, 1, 1000);
    char tok[32];
    for (int i = 0; i < 6 && rc == RSV_OK; i++) {
        /* pool 4 -> 3 -> 2 -> 1: the third reserve (i == 3 after the
         * first, slow one) leaves the pool below the low-water mark, so a
         * refill follows its commit; cut that refill's COMMIT. */
        if (i == 3) {
            fputs("c 2\n", pin);
            fflush(pin);
            usleep(100000);
        }
        snprintf(tok, sizeof tok, "t%d", i);
        rc = rsv_reserve_one(ctx, 1, tok, strlen(tok), 1, 1, 1, 0);
        unsigned int st = 0;
        mariadb_get_infov(db, MARIADB_CONNECTION_SERVER_STATUS, &st);
        printf("reserve %s -> %s %s (socket %d, in_trans %d)\n", tok,
               rsv_code_name(rc), rc ? rsv_errmsg(ctx) : "",
               (int)mysql_get_socket(db), (st & SERVER_STATUS_IN_TRANS) != 0);
        if (i == 3)
            rc = RSV_OK; /* continue: the next call shows the state */
    }
    int bug = rc == RSV_EINTXN;
    printf("%s\n", bug ? "BUG: RSV_EINTXN on a dead connection after a "
                         "successful reserve (expected RSV_ECONN)"
                       : "no bug seen");
    fclose(pin);
    kill(p, SIGTERM);
    return bug;
}
