/* cc minimal.c $(pkg-config --cflags --libs reserve)
 * Connects through RSV_SOCKET (default /run/mysqld/mysqld.sock) as
 * RSV_USER (root) with RSV_PASSWORD to the database RSV_DATABASE (shop),
 * into which sql/schema.sql has been loaded. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mysql.h>
#include <reserve.h>

static const char *env(const char *name, const char *fallback)
{
    const char *v = getenv(name);
    return v && *v ? v : fallback;
}

int main(void)
{
    MYSQL *db = mysql_init(NULL);
    if (!mysql_real_connect(db, NULL, env("RSV_USER", "root"),
                            getenv("RSV_PASSWORD"), env("RSV_DATABASE", "shop"),
                            0, env("RSV_SOCKET", "/run/mysqld/mysqld.sock"),
                            0)) {
        fprintf(stderr, "connect: %s\n", mysql_error(db));
        return 1;
    }
    rsv_ctx *ctx;
    if (rsv_open(&ctx, db, NULL) != RSV_OK) {
        fprintf(stderr, "rsv_open: %s\n", rsv_errmsg(ctx));
        return 1;
    }
    const uint64_t shop = 1, hoodie = 42, warehouse = 7;
    if (rsv_stock_set(ctx, shop, hoodie, warehouse, 10) != RSV_OK)
        fprintf(stderr, "stock: %s\n", rsv_errmsg(ctx));

    const char *token = "checkout-9001";
    int rc = rsv_reserve_one(ctx, shop, token, strlen(token), hoodie,
                             warehouse, 2, 0 /* default TTL */);
    if (rc == RSV_EOUTOFSTOCK)
        puts("sold out");
    else if (rc != RSV_OK)
        fprintf(stderr, "reserve: %s\n", rsv_errmsg(ctx));
    else if ((rc = rsv_claim(ctx, shop, token, strlen(token))) == RSV_OK)
        puts("sold 2 hoodies");   /* payment succeeded */
    else if (rc == RSV_EINDOUBT)
        puts("retry the claim");  /* idempotent: never takes twice */
    else
        fprintf(stderr, "claim: %s\n", rsv_errmsg(ctx));

    rsv_close(ctx);
    mysql_close(db);
    return rc == RSV_OK ? 0 : 1;
}
