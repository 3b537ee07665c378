/*
 * sqlscript.h - the one loader of SQL scripts (sql/schema.sql): the file
 * split into statements the way the mariadb command-line client reads it,
 * and each statement sent alone.
 *
 * A statement ends at the delimiter (";" until a "DELIMITER xx" line
 * changes it: the schema's procedures use "//") outside quotes and
 * comments.  Each statement goes alone (no multi-statements needed), and
 * every result it answers is read, so an error in the middle of the
 * script is never missed and names its statement and line.  rsv-admin
 * (schema install, schema upgrade) and the tests (tests/loadlib.c, and
 * tests/install-test.sh's program, built against the installed library
 * alone) load the schema with it, so it stays header-only; the Python
 * binding's execute_script is held to it by tests/loaders-test.py.
 */
#ifndef RSV_SQLSCRIPT_H
#define RSV_SQLSCRIPT_H

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <mysql.h>

/* One statement of the file: text into the file's buffer (not
 * terminated) and the line it starts on. */
typedef struct sqlscript_stmt {
    const char *p;
    size_t n;
    int line;
} sqlscript_stmt;

typedef struct sqlscript {
    char *text;
    size_t len;
    sqlscript_stmt *v;
    size_t n, cap;
    long version, oldest; /* of its rsv_schema row; 0 when none (set by
                             rsv-admin, which reads it) */
} sqlscript;

/* The length of the comment at p, or 0.  "--" is a comment only when a
 * blank follows, as for the server. */
static inline size_t sqlscript_comment_len(const char *p, const char *end)
{
    const char *q = p;
    if (*p == '#' || (end - p >= 2 && p[0] == '-' && p[1] == '-' &&
                      (end - p == 2 || isspace((unsigned char)p[2])))) {
        while (q < end && *q != '\n')
            q++;
        return (size_t)(q - p);
    }
    if (end - p >= 2 && p[0] == '/' && p[1] == '*') {
        for (q = p + 2; end - q >= 2 && !(q[0] == '*' && q[1] == '/'); q++)
            ;
        return end - q >= 2 ? (size_t)(q + 2 - p) : (size_t)(end - p);
    }
    return 0;
}

/* Past blanks and comments between statements; not past an executable
 * comment (/ *! ... * /), which is a statement of its own. */
static inline const char *sqlscript_skip_blank(const char *p,
                                               const char *end)
{
    for (;;) {
        while (p < end && isspace((unsigned char)*p))
            p++;
        if (end - p >= 3 && p[0] == '/' && p[1] == '*' &&
            (p[2] == '!' || p[2] == 'M'))
            return p;
        size_t c = p < end ? sqlscript_comment_len(p, end) : 0;
        if (!c)
            return p;
        p += c;
    }
}

/* Where the statement that starts at p ends: at the first delimiter
 * outside quotes and comments, or the end of the text.  *quote is set to
 * the quote character of a string the text ends inside. */
static inline const char *sqlscript_stmt_end(const char *p, const char *end,
                                             const char *delim, char *quote)
{
    size_t dl = strlen(delim);
    while (p < end) {
        char ch = *p;
        if (ch == '\'' || ch == '"' || ch == '`') {
            for (p++; p < end && *p != ch; p++)
                if (*p == '\\' && ch != '`' && end - p > 1)
                    p++;
            if (p == end) {
                *quote = ch;
                return end;
            }
            p++; /* a doubled quote just opens the next string */
            continue;
        }
        size_t c = sqlscript_comment_len(p, end);
        if (c)
            p += c;
        else if ((size_t)(end - p) >= dl && memcmp(p, delim, dl) == 0)
            return p;
        else
            p++;
    }
    return end;
}

/* Split the text into statements the way the mariadb client reads a
 * file: a statement ends at the delimiter (";" until a "DELIMITER xx"
 * line changes it; the file's procedures use "//") outside quotes and
 * comments; leading blanks and comments are dropped.  0, or -1 with a
 * message in err. */
static inline int sqlscript_split(sqlscript *s, char *err, size_t errlen)
{
    char delim[16] = ";";
    const char *p = s->text, *end = s->text + s->len, *counted = p;
    int line = 1;
    for (;;) {
        p = sqlscript_skip_blank(p, end);
        if (p == end)
            return 0;
        while (counted < p)
            if (*counted++ == '\n')
                line++;
        if (end - p > 9 && strncasecmp(p, "delimiter", 9) == 0 &&
            (p[9] == ' ' || p[9] == '\t')) {
            /* a command of the client, not SQL */
            const char *d = p + 9;
            while (d < end && (*d == ' ' || *d == '\t'))
                d++;
            size_t dl = 0;
            while (d + dl < end && !isspace((unsigned char)d[dl]))
                dl++;
            if (dl == 0 || dl >= sizeof delim) {
                snprintf(err, errlen, "line %d: a DELIMITER line without a "
                         "usable delimiter", line);
                return -1;
            }
            memcpy(delim, d, dl);
            delim[dl] = '\0';
            for (p = d + dl; p < end && *p != '\n'; p++)
                ;
            continue;
        }
        char quote = 0;
        const char *e = sqlscript_stmt_end(p, end, delim, &quote);
        if (quote) {
            snprintf(err, errlen, "line %d: the statement that starts "
                     "there ends inside a %c-quoted string", line, quote);
            return -1;
        }
        size_t n = (size_t)(e - p);
        while (n && isspace((unsigned char)p[n - 1]))
            n--;
        if (n) {
            if (s->n == s->cap) {
                size_t cap = s->cap ? s->cap * 2 : 64;
                sqlscript_stmt *v = realloc(s->v, cap * sizeof *v);
                if (!v) {
                    snprintf(err, errlen, "out of memory");
                    return -1;
                }
                s->v = v;
                s->cap = cap;
            }
            s->v[s->n++] = (sqlscript_stmt){p, n, line};
        }
        p = e < end ? e + strlen(delim) : end;
    }
}

static inline void sqlscript_free(sqlscript *s)
{
    free(s->text);
    free(s->v);
}

/* Read and split the file.  0, or -1 with a message in err; free s
 * either way. */
static inline int sqlscript_read(const char *path, sqlscript *s, char *err,
                                 size_t errlen)
{
    memset(s, 0, sizeof *s);
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    size_t cap = 1 << 16;
    s->text = malloc(cap);
    size_t got;
    while (s->text &&
           (got = fread(s->text + s->len, 1, cap - 1 - s->len, f)) > 0) {
        s->len += got;
        if (s->len == cap - 1) {
            /* a schema is tens of KiB; a file this big is something else */
            if (cap >= (16u << 20)) {
                fclose(f);
                snprintf(err, errlen, "%s: larger than 16 MiB, not a schema "
                         "file", path);
                return -1;
            }
            char *t = realloc(s->text, cap *= 2);
            if (!t)
                free(s->text);
            s->text = t;
        }
    }
    int bad = ferror(f);
    fclose(f);
    if (!s->text) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    s->text[s->len] = '\0';
    if (bad) {
        snprintf(err, errlen, "cannot read %s", path);
        return -1;
    }
    if (memchr(s->text, '\0', s->len)) {
        snprintf(err, errlen, "%s: a NUL byte: not an SQL file", path);
        return -1;
    }
    return sqlscript_split(s, err, errlen);
}

/* Send one statement and read every result it answers.  0 or -1. */
static inline int sqlscript_exec(MYSQL *c, const sqlscript_stmt *st)
{
    if (mysql_real_query(c, st->p, (unsigned long)st->n) != 0)
        return -1;
    int rc;
    do {
        MYSQL_RES *r = mysql_store_result(c);
        if (r)
            mysql_free_result(r);
        else if (mysql_field_count(c) != 0)
            return -1;
    } while ((rc = mysql_next_result(c)) == 0);
    return rc > 0 ? -1 : 0;
}

/* Split text (copied) and run every statement: 0, or -1 with the failing
 * statement's line and the server's message in err. */
static inline int sqlscript_run(MYSQL *c, const char *text, char *err,
                                size_t errlen)
{
    sqlscript s;
    memset(&s, 0, sizeof s);
    s.len = strlen(text);
    s.text = malloc(s.len + 1);
    if (!s.text) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    memcpy(s.text, text, s.len + 1);
    int rc = sqlscript_split(&s, err, errlen);
    for (size_t i = 0; rc == 0 && i < s.n; i++)
        if (sqlscript_exec(c, &s.v[i]) != 0) {
            snprintf(err, errlen, "line %d: %s (near: %.80s)", s.v[i].line,
                     mysql_error(c), s.v[i].p);
            rc = -1;
        }
    sqlscript_free(&s);
    return rc;
}

#endif
