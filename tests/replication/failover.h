/*
 * failover.h - what the parts of failover_load share: the shop the load
 * works on, the command line (struct cfg), small helpers (the client
 * plumbing is tests/loadlib.h), and the entry
 * point of each mode (load_run.c, load_check.c, relay.c; main and the
 * helpers are in failover_load.c).
 */
#ifndef FAILOVER_H
#define FAILOVER_H

#include <stdint.h>

#include <mysql.h>

#include "../loadlib.h"

#define SHOP 1
#define MAX_EP 4       /* servers a client knows of */
#define MAX_ALLOC 8    /* item/location pairs of one reserve, logged */
#define TOKLEN 48      /* checkout tokens, with their NUL */

struct cfg {
    int n_ep;
    char ep_host[MAX_EP][64];
    unsigned ep_port[MAX_EP];
    const char *user, *password, *db, *logdir, *socket, *label;
    int clients, after_failover_s, max_s, no_failover, setup, reconcile;
    int expect_loss;
    int replica_ack;   /* the clients' contexts refuse to acknowledge what
                          no replica has (RSV_OPT_REPLICA_ACK) */
    unsigned seed;
};

extern struct cfg C;

_Noreturn void die(const char *fmt, ...);
/* Server ep of --endpoints, with --user and --password and the timeouts
 * of every connection of the program. */
void endpoint_server(int ep, ll_server *s);

int run_main(void);
int check_main(void);
_Noreturn void relay_main(unsigned listen_port);

#endif
