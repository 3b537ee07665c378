/*
 * sqlscript.h - run an SQL script (sql/schema.sql) the way the mariadb
 * command-line client does: statements end at ";" until a "DELIMITER xx"
 * line changes the delimiter (the schema's stored procedure needs that).
 *
 * The test programs load the schema through tests/loadlib.c; this part
 * stays header-only so that tests/install-test.sh can compile it into a
 * program built against the installed library alone.  The connection
 * must have CLIENT_MULTI_STATEMENTS: the ";" parts are sent whole.  Every
 * result of every statement is read and checked, so an error in the
 * middle of the script is never missed.
 */
#ifndef RSV_TESTS_SQLSCRIPT_H
#define RSV_TESTS_SQLSCRIPT_H

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <mysql.h>

/* Nothing but blanks and "--" comment lines? */
static inline int sqlscript_blank(const char *p, size_t n)
{
    const char *end = p + n;
    while (p < end) {
        while (p < end && isspace((unsigned char)*p))
            p++;
        if (p + 1 < end && p[0] == '-' && p[1] == '-') {
            while (p < end && *p != '\n')
                p++;
            continue;
        }
        if (p < end)
            return 0;
    }
    return 1;
}

static inline int sqlscript_send(MYSQL *c, const char *p, size_t n, char *err,
                          size_t errlen)
{
    if (sqlscript_blank(p, n))
        return 0;
    int rc = mysql_real_query(c, p, (unsigned long)n);
    for (;;) {
        if (rc != 0) {
            snprintf(err, errlen, "%s (near: %.80s)", mysql_error(c), p);
            return -1;
        }
        MYSQL_RES *r = mysql_store_result(c);
        if (r)
            mysql_free_result(r);
        else if (mysql_field_count(c) != 0) {
            snprintf(err, errlen, "reading a result: %s", mysql_error(c));
            return -1;
        }
        rc = mysql_next_result(c);
        if (rc == -1)
            return 0;
    }
}

/* 0, or -1 with the server's message in err. */
static inline int sqlscript_run(MYSQL *c, const char *text, char *err, size_t errlen)
{
    char delim[16] = ";";
    const char *chunk = text; /* start of text not yet sent */
    const char *line = text;
    while (*line) {
        const char *eol = strchr(line, '\n');
        const char *next = eol ? eol + 1 : line + strlen(line);
        const char *s = line;
        while (s < next && (*s == ' ' || *s == '\t'))
            s++;
        size_t len = (size_t)(next - s);
        while (len && isspace((unsigned char)s[len - 1]))
            len--;
        if (len > 10 && strncasecmp(s, "DELIMITER ", 10) == 0) {
            /* everything before this line ends with the old delimiter */
            if (strcmp(delim, ";") == 0 &&
                sqlscript_send(c, chunk, (size_t)(line - chunk), err,
                               errlen) != 0)
                return -1;
            size_t dl = len - 10;
            if (dl == 0 || dl >= sizeof delim) {
                snprintf(err, errlen, "bad DELIMITER line");
                return -1;
            }
            memcpy(delim, s + 10, dl);
            delim[dl] = '\0';
            chunk = next;
        } else if (strcmp(delim, ";") != 0) {
            size_t dl = strlen(delim);
            /* a statement ends where a line ends with the delimiter */
            if (len >= dl && memcmp(s + len - dl, delim, dl) == 0) {
                if (sqlscript_send(c, chunk, (size_t)(s + len - dl - chunk),
                                   err, errlen) != 0)
                    return -1;
                chunk = next;
            }
        }
        line = next;
    }
    if (strcmp(delim, ";") != 0) {
        if (!sqlscript_blank(chunk, strlen(chunk))) {
            snprintf(err, errlen, "script ends inside DELIMITER %s", delim);
            return -1;
        }
        return 0;
    }
    return sqlscript_send(c, chunk, strlen(chunk), err, errlen);
}

#endif
