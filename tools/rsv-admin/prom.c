/*
 * prom.c - the Prometheus text exposition format (0.0.4) rsv-admin
 * writes: to stdout, or to a file that a collector reads (node_exporter's
 * textfile collector), replaced whole by a rename so that a reader never
 * sees a file half written.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "admin.h"

int prom_open(prom_out *p, const char *path)
{
    p->path = path;
    p->tmp[0] = '\0';
    if (!path) {
        p->f = stdout;
        return 0;
    }
    /* Beside the target, in its directory: rename() is atomic only
     * within one file system.  The node_exporter collector reads only
     * names ending in .prom, so the temporary file is never read. */
    int n = snprintf(p->tmp, sizeof p->tmp, "%s.%ld.tmp", path,
                     (long)getpid());
    if (n < 0 || (size_t)n >= sizeof p->tmp) {
        fprintf(stderr, "%s: --metrics-file: the path is too long\n", prog);
        return EXIT_ERROR;
    }
    p->f = fopen(p->tmp, "w");
    if (!p->f) {
        fprintf(stderr, "%s: --metrics-file: cannot create %s: %s\n", prog,
                p->tmp, strerror(errno));
        return EXIT_ERROR;
    }
    return 0;
}

int prom_close(prom_out *p, int ok)
{
    if (!p->path) {
        fflush(stdout);
        return 0;
    }
    int bad = ferror(p->f);
    if (fclose(p->f) != 0)
        bad = 1;
    p->f = NULL;
    if (!ok || bad) {
        unlink(p->tmp);
        if (bad) {
            fprintf(stderr, "%s: --metrics-file: cannot write %s\n", prog,
                    p->tmp);
            return EXIT_ERROR;
        }
        return 0;
    }
    if (rename(p->tmp, p->path) != 0) {
        fprintf(stderr, "%s: --metrics-file: cannot rename %s to %s: %s\n",
                prog, p->tmp, p->path, strerror(errno));
        unlink(p->tmp);
        return EXIT_ERROR;
    }
    return 0;
}

void prom_family(FILE *f, const char *name, const char *type,
                 const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void prom_label_value(FILE *f, const char *v)
{
    fputc('"', f);
    for (; *v; v++) {
        if (*v == '\\' || *v == '"')
            fputc('\\', f);
        if (*v == '\n')
            fputs("\\n", f);
        else
            fputc(*v, f);
    }
    fputc('"', f);
}
