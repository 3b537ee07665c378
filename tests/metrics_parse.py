#!/usr/bin/env python3
"""Reads a file of Prometheus text with prometheus_client's parser (the
Prometheus project's Python client, Debian's python3-prometheus-client)
and prints what it understood, for tests/check_metrics.c to compare with
the library's own counters:

    # <family> <type>
    <sample name> <label>=<JSON string>,... (sorted; "-" for none) <value>

On the way it checks what the format asks of the text: each family once,
and for a histogram, per label set, buckets in increasing order of their
bounds, cumulative, ending with +Inf, which equals _count, and a _sum.
Exits 1 with a message on stderr if the text does not parse or a check
fails.  Usage: metrics_parse.py FILE
"""

import json
import math
import sys

from prometheus_client.parser import text_string_to_metric_families


def fail(msg):
    sys.stderr.write("metrics_parse: %s\n" % msg)
    sys.exit(1)


def check_histogram(fam):
    series = {}
    for s in fam.samples:
        key = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
        h = series.setdefault(key, {"buckets": [], "sum": None,
                                    "count": None})
        if s.name == fam.name + "_bucket":
            h["buckets"].append((float(s.labels["le"]), s.value))
        elif s.name == fam.name + "_sum":
            h["sum"] = s.value
        elif s.name == fam.name + "_count":
            h["count"] = s.value
        else:
            fail("%s: unexpected sample %s" % (fam.name, s.name))
    for key, h in series.items():
        where = "%s%s" % (fam.name, dict(key))
        b = h["buckets"]
        if not b or h["sum"] is None or h["count"] is None:
            fail("%s: buckets, _sum or _count missing" % where)
        for (le0, n0), (le1, n1) in zip(b, b[1:]):
            if not le0 < le1:
                fail("%s: bucket bounds not increasing: %r, %r" %
                     (where, le0, le1))
            if not n0 <= n1:
                fail("%s: buckets not cumulative: le=%r has %r, le=%r has "
                     "%r" % (where, le0, n0, le1, n1))
        if not math.isinf(b[-1][0]):
            fail("%s: no +Inf bucket" % where)
        if b[-1][1] != h["count"]:
            fail("%s: +Inf bucket %r != _count %r" %
                 (where, b[-1][1], h["count"]))


def main(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    seen = set()
    try:
        families = list(text_string_to_metric_families(text))
    except Exception as e:  # the parser raises ValueError and others
        fail("the text does not parse: %r" % e)
    for fam in families:
        if fam.name in seen:
            fail("family %s appears twice" % fam.name)
        seen.add(fam.name)
        print("# %s %s" % (fam.name, fam.type))
        for s in fam.samples:
            labels = ",".join("%s=%s" % (k, json.dumps(v))
                              for k, v in sorted(s.labels.items()))
            print("%s %s %r" % (s.name, labels or "-", s.value))
        if fam.type == "histogram":
            check_histogram(fam)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        fail("usage: metrics_parse.py FILE")
    main(sys.argv[1])
