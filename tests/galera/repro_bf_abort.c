/*
 * repro_bf_abort.c - the smallest program that shows what a Galera node
 * does to a transaction sent as prepared statements when a write set from
 * another node conflicts with it (a brute-force abort).  No libreserve
 * code is involved.
 *
 * Owns: a private database (rsvrepro) with one hot row and two journal
 * tables, clients on all three nodes of the cluster of
 * tests/galera/cluster.sh, and the check afterwards.  Each client runs,
 * with unique tokens, the shape of a libreserve transaction:
 *
 *   START TRANSACTION
 *   SELECT the hot row FOR UPDATE          (the row every node updates)
 *   SELECT that takes a while              (reads, as the library's do)
 *   INSERT INTO journal_a (token)
 *   UPDATE the hot row (+1)
 *   INSERT INTO journal_b (token)
 *   COMMIT, or ROLLBACK after any error
 *
 * so that hot.n = rows of journal_a = rows of journal_b, and a token
 * whose transaction was rolled back is in neither journal.  Modes:
 *
 *   binary   the statements prepared (the binary protocol)
 *   text     the same statements as text (COM_QUERY)
 *   checked  binary, and after every statement the status of its answer
 *            must still say "in a transaction" (SERVER_STATUS_IN_TRANS,
 *            read locally); if not, the attempt ends there: what
 *            libreserve does on a Galera node
 *   proc     the whole transaction in a stored procedure (START
 *            TRANSACTION to COMMIT, a handler that rolls back on any
 *            error), sent as one prepared CALL, as the library's one-trip
 *            procedures are
 *   proc-checked  the same procedure, which after every statement checks
 *            @@in_transaction and, if the transaction has ended, signals
 *            a deadlock (1213) that rolls back and ends the CALL
 *
 * Usage: repro_bf_abort DIR MODE [seconds] [clients per node]
 * Prints what it found; the last line is "repro: MODE: all or nothing"
 * (exit 0) or "repro: MODE: NOT all or nothing ..." (exit 1).
 */
#define _DEFAULT_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mysql.h>
#include <mysqld_error.h>

#define NODES 3
#define MAXW 48
#define STEPS 5 /* statements between START TRANSACTION and COMMIT */

enum { MODE_BINARY, MODE_TEXT, MODE_CHECKED, MODE_PROC,
       MODE_PROC_CHECKED };

/* what proc-checked signals when the transaction has ended under it */
#define ENDED_MSG "transaction ended under the procedure"

static char sockets[NODES][600];
static int mode, seconds = 20, per_node = 3;
static atomic_int stop_flag;
static char slow_select[32768];

struct worker {
    int id, node;
    MYSQL *m;
    MYSQL_STMT *ps[STEPS];
    MYSQL_STMT *call; /* proc modes */
    char (*toks)[24];  /* tokens of committed transactions */
    size_t ncommitted, cap;
    char (*rolled)[24]; /* tokens of rolled-back transactions */
    size_t nrolled, rcap;
    long lost_frames;  /* (checked) answers that said the transaction had
                          ended although no error came */
    long errors[2];    /* 1213, others */
    unsigned int other; /* the last other error */
};

static struct worker workers[MAXW];

static MYSQL *connect_node(int node, const char *db)
{
    MYSQL *m = mysql_init(NULL);
    if (!m)
        return NULL;
    unsigned to = 60;
    mysql_options(m, MYSQL_OPT_READ_TIMEOUT, &to);
    if (!mysql_real_connect(m, NULL, "root", NULL, db, 0, sockets[node], 0)) {
        fprintf(stderr, "repro: node %d: %s\n", node + 1, mysql_error(m));
        mysql_close(m);
        return NULL;
    }
    return m;
}

static int query(MYSQL *m, const char *sql)
{
    if (mysql_query(m, sql)) {
        fprintf(stderr, "repro: %.80s: %s\n", sql, mysql_error(m));
        return -1;
    }
    MYSQL_RES *r = mysql_store_result(m);
    if (r)
        mysql_free_result(r);
    return 0;
}

static long long query_int(MYSQL *m, const char *sql)
{
    if (mysql_query(m, sql))
        return -1;
    MYSQL_RES *r = mysql_store_result(m);
    MYSQL_ROW row = r ? mysql_fetch_row(r) : NULL;
    long long v = row && row[0] ? atoll(row[0]) : -1;
    if (r)
        mysql_free_result(r);
    return v;
}

/* The statements; each has one parameter, the token. */
static const char *step_sql(int k)
{
    switch (k) {
    case 0:
        return "SELECT n FROM hot WHERE id = 1 AND ? IS NOT NULL FOR UPDATE";
    case 1:
        return slow_select;
    case 2:
        return "INSERT INTO journal_a VALUES (?)";
    case 3:
        return "UPDATE hot SET n = n + 1 WHERE id = 1 AND ? IS NOT NULL";
    default:
        return "INSERT INTO journal_b VALUES (?)";
    }
}

static void make_slow_select(void)
{
    /* a read of a few hundred rows through a long statement: the window
     * in which the conflict lands */
    size_t n = (size_t)snprintf(slow_select, sizeof slow_select,
                                "SELECT ? FROM (SELECT 0 AS d");
    for (int u = 1; u < 400 && n < sizeof slow_select - 100; u++)
        n += (size_t)snprintf(slow_select + n, sizeof slow_select - n,
                              " UNION ALL SELECT %d FROM hot h%d WHERE "
                              "h%d.id = 1", u, u, u);
    snprintf(slow_select + n, sizeof slow_select - n, ") AS x LIMIT 1");
}

static int in_transaction(MYSQL *m)
{
    unsigned int status = 0;
    mariadb_get_infov(m, MARIADB_CONNECTION_SERVER_STATUS, &status);
    return (status & SERVER_STATUS_IN_TRANS) != 0;
}

static void count_error(struct worker *w, unsigned int err)
{
    w->errors[err == ER_LOCK_DEADLOCK ? 0 : 1]++;
    if (err != ER_LOCK_DEADLOCK)
        w->other = err;
}

/* Execute a prepared statement with the token as its one parameter and
 * read every answer (a CALL has a status after its results); 1 if all
 * went through. */
static int execute(MYSQL_STMT *st, const char *tok)
{
    MYSQL_BIND b;
    memset(&b, 0, sizeof b);
    unsigned long len = strlen(tok);
    b.buffer_type = MYSQL_TYPE_STRING;
    b.buffer = (void *)tok;
    b.buffer_length = len;
    b.length = &len;
    mysql_stmt_bind_param(st, &b);
    int ok = mysql_stmt_execute(st) == 0;
    for (int more = 0; ok && more == 0;) {
        if (mysql_stmt_field_count(st) > 0) {
            ok = mysql_stmt_store_result(st) == 0;
            mysql_stmt_free_result(st);
        }
        more = ok ? mysql_stmt_next_result(st) : 1;
        ok = more <= 0;
    }
    return ok;
}

/* One statement; 0 if it ran. */
static int run_step(struct worker *w, int k, const char *tok)
{
    if (mode == MODE_TEXT) {
        char sql[sizeof slow_select + 64];
        const char *q = step_sql(k);
        const char *mark = strchr(q, '?');
        snprintf(sql, sizeof sql, "%.*s'%s'%s", (int)(mark - q), q, tok,
                 mark + 1);
        if (mysql_query(w->m, sql)) {
            count_error(w, mysql_errno(w->m));
            return -1;
        }
        MYSQL_RES *r = mysql_store_result(w->m);
        if (r)
            mysql_free_result(r);
        else if (mysql_errno(w->m)) {
            count_error(w, mysql_errno(w->m));
            return -1;
        }
        return 0;
    }
    if (!w->ps[k]) {
        w->ps[k] = mysql_stmt_init(w->m);
        if (mysql_stmt_prepare(w->ps[k], step_sql(k), strlen(step_sql(k)))) {
            count_error(w, mysql_stmt_errno(w->ps[k]));
            mysql_stmt_close(w->ps[k]);
            w->ps[k] = NULL;
            return -1;
        }
    }
    MYSQL_STMT *st = w->ps[k];
    if (!execute(st, tok)) {
        unsigned int err = mysql_stmt_errno(st);
        count_error(w, err ? err : mysql_errno(w->m));
        /* (a statement that failed half-way is never reused:
         * Connector/C would wait for rows the server never sends) */
        mysql_stmt_close(st);
        w->ps[k] = NULL;
        return -1;
    }
    if (mode == MODE_CHECKED && !in_transaction(w->m)) {
        w->lost_frames++;
        return -1;
    }
    return 0;
}

/* proc modes: the whole transaction as one prepared CALL; 0 if it
 * answered without an error (the procedure committed). */
static int run_call(struct worker *w, const char *tok)
{
    if (!w->call) {
        const char *q = mode == MODE_PROC ? "CALL step_txn(?, 0)"
                                          : "CALL step_txn(?, 1)";
        w->call = mysql_stmt_init(w->m);
        if (mysql_stmt_prepare(w->call, q, strlen(q))) {
            count_error(w, mysql_stmt_errno(w->call));
            mysql_stmt_close(w->call);
            w->call = NULL;
            return -1;
        }
    }
    MYSQL_STMT *st = w->call;
    if (!execute(st, tok)) {
        unsigned int err = mysql_stmt_errno(st);
        if (strstr(mysql_stmt_error(st), ENDED_MSG))
            w->lost_frames++;
        else
            count_error(w, err ? err : mysql_errno(w->m));
        mysql_stmt_close(st);
        w->call = NULL;
        return -1;
    }
    return 0;
}

static void note(char (**arr)[24], size_t *n, size_t *cap, const char *tok)
{
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 1024;
        *arr = realloc(*arr, *cap * sizeof **arr);
        if (!*arr) {
            perror("repro");
            exit(2);
        }
    }
    snprintf((*arr)[(*n)++], 24, "%s", tok);
}

static void *worker_main(void *p)
{
    struct worker *w = p;
    mysql_thread_init();
    w->m = connect_node(w->node, "rsvrepro");
    for (long seq = 0; w->m && !atomic_load(&stop_flag); seq++) {
        char tok[24];
        snprintf(tok, sizeof tok, "w%d.%ld", w->id, seq);
        if (mode == MODE_PROC || mode == MODE_PROC_CHECKED) {
            if (run_call(w, tok) == 0) {
                note(&w->toks, &w->ncommitted, &w->cap, tok);
            } else {
                (void)mysql_query(w->m, "ROLLBACK");
                note(&w->rolled, &w->nrolled, &w->rcap, tok);
            }
            continue;
        }
        int ok = query(w->m, "START TRANSACTION") == 0;
        for (int k = 0; k < STEPS && ok; k++)
            ok = run_step(w, k, tok) == 0;
        if (ok && mysql_query(w->m, "COMMIT") == 0) {
            note(&w->toks, &w->ncommitted, &w->cap, tok);
            continue;
        }
        if (ok)
            count_error(w, mysql_errno(w->m));
        (void)mysql_query(w->m, "ROLLBACK");
        note(&w->rolled, &w->nrolled, &w->rcap, tok);
    }
    for (int k = 0; k < STEPS; k++)
        if (w->ps[k])
            mysql_stmt_close(w->ps[k]);
    if (w->call)
        mysql_stmt_close(w->call);
    if (w->m)
        mysql_close(w->m);
    mysql_thread_end();
    return NULL;
}

/* The transaction of the other modes as one procedure.  p_check: after
 * each statement, end with a deadlock if the transaction is gone. */
static int create_proc(MYSQL *m)
{
    static char q[sizeof slow_select + 4096];
    static const char chk[] =
        " IF p_check AND @@in_transaction = 0 THEN SIGNAL SQLSTATE '40001' "
        "SET MYSQL_ERRNO = 1213, MESSAGE_TEXT = '" ENDED_MSG "'; END IF;";
    /* the slow read, its parameter the token, its answer kept */
    const char *from = strstr(slow_select, " FROM ");
    size_t n = (size_t)snprintf(
        q, sizeof q,
        "CREATE PROCEDURE rsvrepro.step_txn(IN p_tok VARCHAR(24), "
        "IN p_check INT) MODIFIES SQL DATA "
        "BEGIN DECLARE v_n BIGINT; DECLARE v_s VARCHAR(24); "
        "DECLARE EXIT HANDLER FOR SQLEXCEPTION "
        "BEGIN ROLLBACK; RESIGNAL; END; "
        "START TRANSACTION; "
        "SELECT n INTO v_n FROM rsvrepro.hot WHERE id = 1 FOR UPDATE;%s "
        "SELECT p_tok INTO v_s%s;%s "
        "INSERT INTO rsvrepro.journal_a VALUES (p_tok);%s "
        "UPDATE rsvrepro.hot SET n = n + 1 WHERE id = 1;%s "
        "INSERT INTO rsvrepro.journal_b VALUES (p_tok);%s "
        "COMMIT; END",
        chk, from, chk, chk, chk, chk);
    if (n >= sizeof q)
        return -1;
    return query(m, q);
}

static int setup(void)
{
    MYSQL *m = connect_node(0, NULL);
    if (!m)
        return -1;
    int rc = query(m, "DROP DATABASE IF EXISTS rsvrepro") ||
             query(m, "CREATE DATABASE rsvrepro") ||
             query(m, "CREATE TABLE rsvrepro.hot (id INT PRIMARY KEY, "
                      "n BIGINT NOT NULL) ENGINE=InnoDB") ||
             query(m, "INSERT INTO rsvrepro.hot VALUES (1, 0)") ||
             query(m, "CREATE TABLE rsvrepro.journal_a (tok VARCHAR(24) "
                      "PRIMARY KEY) ENGINE=InnoDB") ||
             query(m, "CREATE TABLE rsvrepro.journal_b (tok VARCHAR(24) "
                      "PRIMARY KEY) ENGINE=InnoDB");
    if (!rc)
        rc = create_proc(m);
    mysql_close(m);
    if (rc)
        return -1;
    /* every node has the tables before a client starts */
    for (int n = 0; n < NODES; n++) {
        MYSQL *x = connect_node(n, NULL);
        if (!x || query(x, "SET SESSION wsrep_sync_wait = 15") ||
            query_int(x, "SELECT COUNT(*) FROM rsvrepro.hot") != 1) {
            if (x)
                mysql_close(x);
            return -1;
        }
        mysql_close(x);
    }
    return 0;
}

static int tok_cmp(const void *a, const void *b)
{
    return strcmp(a, b);
}

/* The tokens in a journal, sorted. */
static char (*journal(MYSQL *m, const char *table, size_t *n))[24]
{
    char sql[80];
    snprintf(sql, sizeof sql, "SELECT tok FROM %s", table);
    *n = 0;
    if (mysql_query(m, sql))
        return NULL;
    MYSQL_RES *r = mysql_store_result(m);
    size_t rows = r ? (size_t)mysql_num_rows(r) : 0;
    char (*t)[24] = calloc(rows + 1, sizeof *t);
    MYSQL_ROW row;
    while (t && r && (row = mysql_fetch_row(r)) && *n < rows)
        snprintf(t[(*n)++], 24, "%s", row[0]);
    if (r)
        mysql_free_result(r);
    if (t)
        qsort(t, *n, sizeof *t, tok_cmp);
    return t;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s DIR binary|text|checked|proc|proc-checked "
                        "[seconds] "
                        "[clients per node]\n", argv[0]);
        return 2;
    }
    const char *mode_name = argv[2];
    if (!strcmp(mode_name, "binary"))
        mode = MODE_BINARY;
    else if (!strcmp(mode_name, "text"))
        mode = MODE_TEXT;
    else if (!strcmp(mode_name, "checked"))
        mode = MODE_CHECKED;
    else if (!strcmp(mode_name, "proc"))
        mode = MODE_PROC;
    else if (!strcmp(mode_name, "proc-checked"))
        mode = MODE_PROC_CHECKED;
    else
        return 2;
    if (argc > 3)
        seconds = atoi(argv[3]);
    if (argc > 4)
        per_node = atoi(argv[4]);
    if (seconds < 1 || per_node < 1 || per_node * NODES > MAXW)
        return 2;
    for (int n = 0; n < NODES; n++)
        snprintf(sockets[n], sizeof sockets[n], "%s/n%d/mysqld.sock", argv[1],
                 n + 1);
    make_slow_select();
    if (mysql_library_init(0, NULL, NULL) || setup()) {
        fprintf(stderr, "repro: set-up failed\n");
        return 2;
    }
    int nw = per_node * NODES;
    pthread_t th[MAXW];
    for (int i = 0; i < nw; i++) {
        workers[i].id = i;
        workers[i].node = i % NODES;
        pthread_create(&th[i], NULL, worker_main, &workers[i]);
    }
    sleep((unsigned)seconds);
    atomic_store(&stop_flag, 1);
    for (int i = 0; i < nw; i++)
        pthread_join(th[i], NULL);

    MYSQL *m = connect_node(0, "rsvrepro");
    if (!m || query(m, "SET SESSION wsrep_sync_wait = 15"))
        return 2;
    size_t na = 0, nb = 0;
    char (*ja)[24] = journal(m, "journal_a", &na);
    char (*jb)[24] = journal(m, "journal_b", &nb);
    long long hot = query_int(m, "SELECT n FROM hot WHERE id = 1");
    long committed = 0, rolled = 0, lost_a = 0, lost_b = 0, half = 0;
    long lost_frames = 0, e_deadlock = 0, e_other = 0;
    unsigned int other = 0;
    for (int i = 0; i < nw; i++) {
        struct worker *w = &workers[i];
        lost_frames += w->lost_frames;
        e_deadlock += w->errors[0];
        e_other += w->errors[1];
        if (w->other)
            other = w->other;
        committed += (long)w->ncommitted;
        rolled += (long)w->nrolled;
        for (size_t j = 0; j < w->ncommitted; j++) {
            lost_a += !bsearch(w->toks[j], ja, na, sizeof *ja, tok_cmp);
            lost_b += !bsearch(w->toks[j], jb, nb, sizeof *jb, tok_cmp);
        }
        for (size_t j = 0; j < w->nrolled; j++) {
            int a = bsearch(w->rolled[j], ja, na, sizeof *ja, tok_cmp) != NULL;
            int b = bsearch(w->rolled[j], jb, nb, sizeof *jb, tok_cmp) != NULL;
            half += a || b;
            if ((a || b) && half <= 3)
                printf("repro: %s was rolled back, yet journal_a has it: "
                       "%s, journal_b: %s\n", w->rolled[j], a ? "yes" : "no",
                       b ? "yes" : "no");
        }
    }
    printf("repro: %s: %ld transactions, %ld committed, %ld rolled back "
           "(errors: %ld deadlock, %ld other (e.g. %u); answers that said "
           "the transaction had ended without an error: %ld)\n", mode_name,
           committed + rolled, committed, rolled, e_deadlock, e_other, other,
           lost_frames);
    printf("repro: %s: hot.n %lld, journal_a %zu rows, journal_b %zu rows; "
           "committed but missing %ld/%ld; rolled back but (partly) "
           "committed %ld\n", mode_name, hot, na, nb, lost_a, lost_b, half);
    /* proc-checked: a transaction that ended under the procedure is the
     * finding itself, even if no row shows it */
    int bad = hot != (long long)na || na != nb || lost_a || lost_b || half ||
              (mode == MODE_PROC_CHECKED && lost_frames > 0);
    if (bad)
        printf("repro: %s: NOT all or nothing (%ld rolled-back transactions "
               "left rows%s)\n", mode_name, half,
               mode == MODE_PROC_CHECKED && lost_frames
                   ? "; transactions ended under the procedure"
                   : "");
    else
        printf("repro: %s: all or nothing\n", mode_name);
    mysql_close(m);
    return bad;
}
