/* cc minimal.c $(pkg-config --cflags --libs reserve) -Wl,-rpath,$(pkg-config --variable=libdir reserve)
 * Connects to the database RSV_DSN names (make try-db prints one), into
 * which sql/schema.sql has been loaded. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <reserve.h>

int main(void)
{
    const char *dsn = getenv("RSV_DSN");
    if (!dsn || !*dsn)
        dsn = "mariadb://shop:secret@localhost/shop?socket=/run/mysqld/mysqld.sock";
    rsv_ctx *ctx;
    if (rsv_open_dsn(&ctx, dsn, NULL) != RSV_OK) {
        fprintf(stderr, "connect: %s\n", rsv_errmsg(ctx));
        rsv_close(ctx);
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
    else if (rc == RSV_ECLAIMED)
        puts("checkout-9001 was already claimed"); /* a retried checkout */
    else if (rc != RSV_OK)
        fprintf(stderr, "reserve: %s\n", rsv_errmsg(ctx));
    else if ((rc = rsv_claim(ctx, shop, token, strlen(token))) == RSV_OK)
        puts("sold 2 hoodies");   /* payment succeeded */
    else if (rc == RSV_EINDOUBT)
        puts("retry the claim");  /* idempotent: never takes twice */
    else
        fprintf(stderr, "claim: %s\n", rsv_errmsg(ctx));

    rsv_close(ctx);
    return rc == RSV_OK || rc == RSV_ECLAIMED ? 0 : 1;
}
