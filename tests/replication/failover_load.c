/*
 * failover_load.c - the client side of the replication failover test
 * (tests/replication/run.sh, make check-replication): the command line,
 * and the helpers its modes share.
 *
 * Three modes:
 *
 *  run    (load_run.c) many client threads, each with its own
 *         connection, reserve, claim and release checkouts of one shop
 *         (a hot item taken one unit at a time, and carts over a few
 *         other items and two locations), and one thread sweeps.  Clients
 *         know every server of the pair (--endpoints) and write only to
 *         one that is not read-only: when the primary dies they
 *         reconnect, keep away from the replica until it is promoted, and
 *         go on there.  Half of them open their context with a dsn that
 *         lists both servers (rsv_open_dsn; the library connects to the
 *         writable one) and call rsv_reconnect, which finds it again;
 *         the other half keep a MYSQL of their own (rsv_open, reconnected
 *         in place, which reaches one server only) and pick the server
 *         themselves: half of those ask a server whether it is read-only
 *         before using it, the others find out from a refused write
 *         (RSV_ENOTPRIMARY: nothing was applied) and move on.
 *         Every outcome a call ACKNOWLEDGED (it returned) is appended to
 *         the client's log with the server that gave it; RSV_EINDOUBT and
 *         lost connections are settled by repeating the call (idempotent
 *         per token), so every outcome in the logs is known.  Tokens of
 *         holds abandoned to expire start with x, the others with t.  The
 *         run ends a given time after the first outcome acknowledged by
 *         another server than the first one (the failover), or at a hard
 *         limit.
 *
 *  relay  (relay.c) a TCP relay for the replica's connection to the
 *         primary: the test stops it (SIGSTOP) to make the replica's
 *         receiver fall behind while its IO thread still runs.
 *
 *  check  (load_check.c) reads the logs and the database of one server
 *         (the new primary, or a replica read as it is) and reports every
 *         acknowledged hold (for a live one: exactly its units), claim
 *         and release that is not there, the stock on hand the
 *         acknowledged claims imply against the ledger's, and what
 *         rsv_audit says.  --reconcile then re-applies the missing claims
 *         and releases from the logs (standing in for the shop's order
 *         records) and checks again; --expect-loss turns the verdict
 *         round, for a run that must lose work.
 *
 * Log lines (one file per client, ms since the run started):
 *   a OP TOKEN                      a call is about to be made (r, c, l)
 *   R TOKEN RC DOUBT EP MS N i:l:q  a reserve's outcome and allocation
 *   C|L TOKEN RC DOUBT EP MS        a claim's / release's outcome
 *   D WHAT EP MS                    a retry: indoubt, econn, readonly,
 *                                   edb, eintxn
 * EP is the index of the server in --endpoints; DOUBT is 1 when the
 * outcome came from repeating a call whose first answer was in doubt.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "failover.h"

struct cfg C;

_Noreturn void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("failover_load: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(2);
}

void endpoint_server(int ep, ll_server *s)
{
    /* A commit under semi-synchronous replication waits for the replica,
     * so reads may legitimately take a while; a dead server is noticed at
     * once anyway (the connection is reset). */
    *s = (ll_server){.host = C.ep_host[ep], .port = C.ep_port[ep],
                     .user = C.user, .password = C.password,
                     .connect_timeout_s = 2, .rw_timeout_s = 30};
}

static _Noreturn void usage(void)
{
    fprintf(stderr,
"usage: failover_load run --endpoints HOST:PORT,HOST:PORT --logdir DIR\n"
"           [--user U] [--password P] [--database DB] [--clients N]\n"
"           [--after-failover S] [--max-seconds S] [--no-failover]\n"
"           [--setup] [--seed N] [--replica-ack]\n"
"       failover_load relay --listen PORT --endpoints HOST:PORT\n"
"       failover_load check --logdir DIR (--socket PATH | --endpoints H:P)\n"
"           [--user U] [--password P] [--database DB] [--label TEXT]\n"
"           [--reconcile | --expect-loss]\n"
"run: exit 0 when every client kept going through the failover.\n"
"--replica-ack: the clients' contexts answer RSV_EINDOUBT for what only\n"
"the primary has (RSV_OPT_REPLICA_ACK).\n"
"check: exit 0 when nothing acknowledged is missing, the stock on hand is\n"
"what the acknowledged claims leave and the audit is clean; 1 otherwise;\n"
"2 on errors.  --expect-loss: exit 0 when acknowledged holds or claims\n"
"are missing, 1 when none are.\n");
    exit(2);
}

static void parse_endpoints(const char *s)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", s);
    char *sv = NULL;
    for (char *p = strtok_r(buf, ",", &sv); p; p = strtok_r(NULL, ",", &sv)) {
        char *colon = strrchr(p, ':');
        if (!colon || C.n_ep == MAX_EP)
            usage();
        *colon = 0;
        snprintf(C.ep_host[C.n_ep], sizeof C.ep_host[0], "%s", p);
        C.ep_port[C.n_ep] = (unsigned)atoi(colon + 1);
        C.n_ep++;
    }
}

int main(int argc, char **argv)
{
    if (argc < 2)
        usage();
    const char *mode = argv[1];
    C.user = "root";
    C.password = NULL;
    C.db = "shop";
    C.clients = 12;
    C.after_failover_s = 8;
    C.max_s = 90;
    C.seed = (unsigned)time(NULL);
    C.label = "check";
    unsigned listen_port = 0;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--no-failover")) {
            C.no_failover = 1;
            continue;
        }
        if (!strcmp(a, "--setup")) {
            C.setup = 1;
            continue;
        }
        if (!strcmp(a, "--reconcile")) {
            C.reconcile = 1;
            continue;
        }
        if (!strcmp(a, "--expect-loss")) {
            C.expect_loss = 1;
            continue;
        }
        if (!strcmp(a, "--replica-ack")) {
            C.replica_ack = 1;
            continue;
        }
        if (!v)
            usage();
        i++;
        if (!strcmp(a, "--endpoints"))
            parse_endpoints(v);
        else if (!strcmp(a, "--logdir"))
            C.logdir = v;
        else if (!strcmp(a, "--socket"))
            C.socket = v;
        else if (!strcmp(a, "--user"))
            C.user = v;
        else if (!strcmp(a, "--password"))
            C.password = v;
        else if (!strcmp(a, "--database"))
            C.db = v;
        else if (!strcmp(a, "--clients"))
            C.clients = atoi(v);
        else if (!strcmp(a, "--after-failover"))
            C.after_failover_s = atoi(v);
        else if (!strcmp(a, "--max-seconds"))
            C.max_s = atoi(v);
        else if (!strcmp(a, "--seed"))
            C.seed = (unsigned)strtoul(v, NULL, 10);
        else if (!strcmp(a, "--label"))
            C.label = v;
        else if (!strcmp(a, "--listen"))
            listen_port = (unsigned)atoi(v);
        else
            usage();
    }
    if (!strcmp(mode, "relay")) {
        if (!listen_port || C.n_ep != 1)
            usage();
        relay_main(listen_port);
    }
    if (!C.logdir)
        usage();
    if (!strcmp(mode, "run")) {
        if (C.n_ep < 1 || C.clients < 1 || C.clients > 200 || C.max_s < 1)
            usage();
        return run_main();
    }
    if (!strcmp(mode, "check")) {
        if (!C.socket && C.n_ep < 1)
            usage();
        return check_main();
    }
    usage();
}

