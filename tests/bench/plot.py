#!/usr/bin/env python3
"""Plots of the benchmark results, as hand-written SVG (plain python3).

Usage: plot.py RESULTS.txt OUTDIR
       plot.py --headline RESULTS.txt OUT.svg
       plot.py --backlog RECORD.txt OUT.svg
       plot.py --crowd RESULTS.txt OUT.svg

Reads the 'bench design=... workload=... clients=... rtt_us=... binlog=...
[semisync=1] ops_per_s=... p50_us=... p99_us=... p999_us=... rounds=...
ops_per_s_range=MIN-MAX p99_us_range=MIN-MAX' lines of a bench run (the
medians over the rounds) and writes, per server configuration and for
every workload measured at two or more client counts (and the flash sale
always), OUTDIR/bench-WORKLOAD[-CONFIG].svg: throughput and p99 latency
against clients, one line per design, one row of panels per round-trip
time, the range over the rounds as a bar.  The headline configuration
(binlog=1, no replica) has no suffix and its flash sale is also
OUTDIR/bench.svg; the others are suffixed -binlog0 or -semisync.  It also
writes OUTDIR/results.md, the measurements and ratios as Markdown tables.

--crowd draws the flash sale of a `make bench-crowd` run: throughput and
p99 against buyers, one line per design, the clients that were
processes of their own dashed beside the threads.
--headline draws the README's picture from a bench run: one bar per
design and workload at the client count and round trip most workloads
were measured at (64 clients, 0.5 ms in a quick run), binary log on,
with the p99 beside each bar.  --backlog draws the record of
tests/bench/sweep-backlog.sh: journal backlog, expired holds and units
held against time, with the sweeps marked.  `make pictures` runs both on
the records committed under docs/img/.
"""
import math
import os
import re
import sys

DESIGNS = ["libreserve", "libreserve-batch", "libreserve-batcher",
           "hotrow-1rt", "floor-1rt", "hotrow", "floor"]
COLORS = {"libreserve": "#1f6fd1", "libreserve-batch": "#14a38b",
          "libreserve-batcher": "#7b4fc9", "hotrow-1rt": "#d1361f",
          "floor-1rt": "#3a3a3a", "hotrow": "#e89a8c", "floor": "#a8a8a8"}
DASH = {"libreserve": "", "libreserve-batch": "", "libreserve-batcher": "",
        "hotrow-1rt": "", "floor-1rt": "", "hotrow": "6,3", "floor": "2,3"}
# Clients that were processes of their own (bench --processes), drawn
# dashed beside the same design's threads.
PROCS = " (processes)"
for _d in list(DESIGNS):
    DESIGNS.append(_d + PROCS)
    COLORS[_d + PROCS] = COLORS[_d]
    DASH[_d + PROCS] = "5,4"
# What each design is, for a reader of the headline picture.
DESIGN_TITLE = {
    "libreserve": "libreserve, one call a buyer",
    "libreserve-batch": "libreserve, batches of 8 buyers",
    "libreserve-batcher": "libreserve through one rsv_batcher",
    "hotrow-1rt": "hot row: a counter row, one round trip",
    "floor-1rt": "floor: one INSERT, no stock check",
    "hotrow": "hot row by statements",
    "floor": "floor by statements"}
WORKLOAD_TITLE = {
    "flash1": "flash sale, one item",
    "flash1q2": "flash sale, 2 units a buyer",
    "flash1q5": "flash sale, 5 units a buyer",
    "spread10k": "10,000 items, no contention",
    "cart5x3": "carts of 5 lines",
    "claim1": "claims, one item",
    "soldout1": "a sold-out item",
    "soldcart5": "carts with a sold-out line",
    "hotcart5": "carts with the flash-sale item"}

LINE = re.compile(
    r"^bench design=(\S+) workload=(\S+) clients=(\d+) rtt_us=(\d+)"
    r"(?: binlog=(\d))?( semisync=1)?( clients_as=processes)? "
    r"ops_per_s=(\d+) p50_us=(\d+) p99_us=(\d+) p999_us=(\d+)(.*)$")
RANGE = re.compile(r"(ops_per_s|p99_us)_range=(\d+)-(\d+)")


def config_of(binlog, semisync):
    """Lines without binlog= come from runs before it was printed, which
    all had the binary log off."""
    if semisync:
        return "semisync"
    return "binlog1" if binlog == "1" else "binlog0"


def parse(path):
    rows = []
    with open(path) as f:
        for line in f:
            m = LINE.match(line.rstrip("\n"))
            if m:
                d, w, c, r, bl, ss, procs, ops, p50, p99, p999, rest = \
                    m.groups()
                if procs:  # a crowd of processes: a line of its own
                    d += PROCS
                row = dict(design=d, workload=w, clients=int(c), rtt=int(r),
                           config=config_of(bl, ss), ops=int(ops),
                           p50=int(p50), p99=int(p99), p999=int(p999))
                for k, lo, hi in RANGE.findall(rest):
                    row[k + "_range"] = (int(lo), int(hi))
                rows.append(row)
    return rows


def esc(s):
    return (str(s).replace("&", "&amp;").replace("<", "&lt;")
            .replace(">", "&gt;"))


def nice_max(v):
    """A round upper bound >= v for a linear axis."""
    if v <= 0:
        return 1.0
    e = 10 ** math.floor(math.log10(v))
    for m in (1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10):
        if m * e >= v:
            return m * e
    return 10 * e


def fmt_num(v):
    if v >= 1000 and v % 1000 == 0:
        return "%dk" % (v // 1000)
    if v >= 1000:
        return "%.1fk" % (v / 1000.0)
    if v == int(v):
        return "%d" % v
    return "%g" % v


class Svg:
    def __init__(self, w, h):
        self.w, self.h = w, h
        self.parts = []

    def add(self, s):
        self.parts.append(s)

    def text(self, x, y, s, size=12, anchor="start", weight="normal",
             rotate=None, color="#222"):
        tr = ' transform="rotate(%d %.1f %.1f)"' % (rotate, x, y) if rotate else ""
        self.add('<text x="%.1f" y="%.1f" font-size="%d" text-anchor="%s" '
                 'font-weight="%s" fill="%s"%s>%s</text>'
                 % (x, y, size, anchor, weight, color, tr, esc(s)))

    def line(self, x1, y1, x2, y2, color="#000", width=1, dash=""):
        d = ' stroke-dasharray="%s"' % dash if dash else ""
        self.add('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" '
                 'stroke-width="%g"%s/>' % (x1, y1, x2, y2, color, width, d))

    def render(self):
        return ('<svg xmlns="http://www.w3.org/2000/svg" width="%d" '
                'height="%d" viewBox="0 0 %d %d" font-family="DejaVu Sans, '
                'Helvetica, Arial, sans-serif">\n<rect width="100%%" '
                'height="100%%" fill="white"/>\n%s\n</svg>\n'
                % (self.w, self.h, self.w, self.h, "\n".join(self.parts)))


def panel(svg, x0, y0, w, h, title, clients, series, ylabel, log):
    """series: {design: [(clients, median, (min, max) or None)]}"""
    svg.text(x0 + w / 2, y0 - 10, title, size=13, anchor="middle",
             weight="bold")
    svg.add('<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" '
            'stroke="#999"/>' % (x0, y0, w, h))
    xs = sorted(clients)
    if len(xs) == 1:
        xpos = {xs[0]: x0 + w / 2}
    else:
        lo, hi = math.log2(max(xs[0], 1)), math.log2(max(xs[-1], 1))
        span = (hi - lo) or 1
        xpos = {c: x0 + 30 + (w - 60) * (math.log2(max(c, 1)) - lo) / span
                for c in xs}
    vals = [v for pts in series.values() for _, v, _ in pts if v > 0]
    vals += [x for pts in series.values() for _, _, rg in pts if rg
             for x in rg if x > 0]
    if not vals:
        return
    if log:
        lo = 10 ** math.floor(math.log10(min(vals)))
        hi = 10 ** math.ceil(math.log10(max(vals)))
        if hi <= lo:
            hi = lo * 10
        ticks = []
        t = lo
        while t <= hi * 1.0001:
            ticks += [t * m for m in (1, 2, 5) if t * m <= hi * 1.0001]
            t *= 10

        def ypos(v):
            v = max(v, lo)
            return y0 + h - h * (math.log10(v) - math.log10(lo)) / (
                math.log10(hi) - math.log10(lo))
    else:
        hi = nice_max(max(vals) * 1.05)
        ticks = [hi * i / 5 for i in range(6)]

        def ypos(v):
            return y0 + h - h * v / hi
    for t in ticks:
        y = ypos(t)
        svg.line(x0, y, x0 + w, y, color="#e4e4e4")
        svg.text(x0 - 6, y + 4, fmt_num(t), size=10, anchor="end")
    for c in xs:
        svg.line(xpos[c], y0 + h, xpos[c], y0 + h + 4, color="#999")
        svg.text(xpos[c], y0 + h + 16, str(c), size=10, anchor="middle")
    procs = any(d.endswith(PROCS) and series.get(d) for d in DESIGNS)
    svg.text(x0 + w / 2, y0 + h + 32,
             "clients: threads or processes (one connection each)" if procs
             else "client threads (one connection each)",
             size=11, anchor="middle")
    svg.text(x0 - 46, y0 + h / 2, ylabel, size=11, anchor="middle",
             rotate=-90)
    for i, d in enumerate(DESIGNS):
        pts = sorted(series.get(d, []), key=lambda p: p[0])
        if not pts:
            continue
        # designs side by side at one client count, so the bars of the
        # ranges do not cover each other
        dx = (i - (len(DESIGNS) - 1) / 2.0) * 4
        coords = [(xpos[c] + dx, ypos(v), rg) for c, v, rg in pts
                  if c in xpos]
        if len(coords) > 1:
            svg.add('<polyline fill="none" stroke="%s" stroke-width="2"%s '
                    'points="%s"/>' % (
                        COLORS[d],
                        ' stroke-dasharray="%s"' % DASH[d] if DASH[d] else "",
                        " ".join("%.1f,%.1f" % (x, y) for x, y, _ in coords)))
        for (x, y, rg), (_, _, raw) in zip(coords, pts):
            if raw:
                svg.line(x, ypos(raw[0]), x, ypos(raw[1]), color=COLORS[d],
                         width=1.5)
            svg.add('<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"/>'
                    % (x, y, COLORS[d]))


def dedupe(rows):
    """The last line of each (config, design, workload, clients, rtt)."""
    seen = {}
    for r in rows:
        seen[(r["config"], r["design"], r["workload"], r["clients"],
              r["rtt"])] = r
    return list(seen.values())


CONFIG_TITLE = {"binlog1": "binary log on, synced (sync_binlog=1)",
                "binlog0": "binary log off",
                "semisync": "binary log on + semi-sync replica"}


def plot_workload(rows, workload, config, path):
    rows = dedupe(rows)
    rtts = sorted({r["rtt"] for r in rows})
    clients = sorted({r["clients"] for r in rows})
    # the legend names the designs measured, up to four a row
    shown = [d for d in DESIGNS if any(r["design"] == d for r in rows)]
    per_row = 4
    legend_rows = max(1, (len(shown) + per_row - 1) // per_row)
    pw, ph = 380, 240
    left, top, gapx, gapy = 80, 80 + 20 * (legend_rows - 1), 110, 110
    width = left + 2 * pw + gapx + 40
    height = top + len(rtts) * (ph + gapy) + 10
    svg = Svg(width, height)
    svg.text(width / 2, 22, "libreserve benchmark: %s, %s (median of the "
             "rounds, bar: min-max)" % (workload, CONFIG_TITLE.get(config,
                                                                   config)),
             size=14, anchor="middle", weight="bold")
    step = 180
    for i, d in enumerate(shown):
        in_row = min(per_row, len(shown) - i // per_row * per_row)
        x = (width - step * in_row) / 2 + (i % per_row) * step
        y = 48 + 20 * (i // per_row)
        svg.line(x, y, x + 28, y, color=COLORS[d], width=2, dash=DASH[d])
        svg.add('<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"/>'
                % (x + 14, y, COLORS[d]))
        svg.text(x + 34, y + 4, d, size=12)
    for i, rtt in enumerate(rtts):
        y0 = top + i * (ph + gapy)
        net = "local socket" if rtt == 0 else "%.1f ms RTT" % (rtt / 1000.0)
        sel = [r for r in rows if r["rtt"] == rtt]
        thr = {d: [(r["clients"], r["ops"], r.get("ops_per_s_range"))
                   for r in sel if r["design"] == d] for d in DESIGNS}
        p99 = {d: [(r["clients"], r["p99"] / 1000.0,
                    tuple(x / 1000.0 for x in r["p99_us_range"])
                    if "p99_us_range" in r else None)
                   for r in sel if r["design"] == d] for d in DESIGNS}
        panel(svg, left, y0, pw, ph, "throughput, %s" % net, clients, thr,
              "operations / s", log=False)
        panel(svg, left + pw + gapx, y0, pw, ph, "p99 latency, %s" % net,
              clients, p99, "p99 (ms, log scale)", log=True)
    with open(path, "w") as f:
        f.write(svg.render())


def headline_selection(rows):
    """The headline comparison: the binlog1 rows at the (clients, RTT)
    most workloads were measured at (64 clients, 0.5 ms in a quick run),
    in the order the workloads were run."""
    rows = [r for r in dedupe(rows) if r["config"] == "binlog1"]
    if not rows:
        return [], None, None
    count = {}
    for r in rows:
        k = (r["clients"], r["rtt"])
        count.setdefault(k, set()).add(r["workload"])
    clients, rtt = max(count, key=lambda k: (len(count[k]), k[0], k[1]))
    return ([r for r in rows if r["clients"] == clients and r["rtt"] == rtt],
            clients, rtt)


def provenance(text):
    """'make bench-quick, 2026-12-02, 2 cpu(s), 1 round' from the
    run's own header lines."""
    m = re.search(r"^# libreserve bench: library (\S+), (\d{4}-\d\d-\d\d)\S*"
                  r", (\d+) cpu\(s\) online, mode=(\w+)", text, re.M)
    rounds = re.search(r" rounds=(\d+)", text)
    if not m:
        return ""
    return ("make bench%s on %s CPUs, %s, library %s, %s round%s each"
            % ("-quick" if m.group(4) == "quick" else "", m.group(3),
               m.group(2), m.group(1), rounds.group(1) if rounds else "?",
               "" if rounds and rounds.group(1) == "1" else "s"))


def fmt_int(v):
    return "{:,}".format(int(round(v)))


def fmt_ms(us):
    ms = us / 1000.0
    return "%.0f ms" % ms if ms >= 10 else "%.1f ms" % ms


def plot_headline(rows, text, path):
    """One horizontal bar per design and workload: reservations (or
    claims) per second, the p99 latency written beside it."""
    sel, clients, rtt = headline_selection(rows)
    if not sel:
        raise ValueError("no binlog=1 rows for the headline")
    workloads = []
    for r in sel:
        if r["workload"] not in workloads:
            workloads.append(r["workload"])
    shown = [d for d in DESIGNS if any(r["design"] == d for r in sel)]
    bar, gap, group_gap = 17, 3, 22
    left, right, top = 210, 170, 90 + 20 * ((len(shown) + 1) // 2)
    plot_w = 420
    width = left + plot_w + right
    groups = [[r for d in shown for r in sel
               if r["workload"] == w and r["design"] == d]
              for w in workloads]
    height = (top + sum(len(g) * (bar + gap) for g in groups) +
              group_gap * len(groups) + 50)
    svg = Svg(width, height)
    net = "local socket" if rtt == 0 else "%g ms round trip" % (rtt / 1000.0)
    svg.text(width / 2, 24, "Operations per second, %d clients, %s, binary "
             "log on and synced" % (clients, net), size=15, anchor="middle",
             weight="bold")
    svg.text(width / 2, 44, provenance(text) + "; every success checked "
             "against the tables", size=11, anchor="middle", color="#555")
    # legend, two designs a row
    for i, d in enumerate(shown):
        x = 40 + (i % 2) * (width / 2 - 20)
        y = 72 + 20 * (i // 2)
        svg.add('<rect x="%.1f" y="%.1f" width="14" height="12" fill="%s"/>'
                % (x, y - 10, COLORS[d]))
        svg.text(x + 20, y, DESIGN_TITLE.get(d, d), size=12)
    hi = nice_max(max(r["ops"] for r in sel) * 1.02)

    def xpos(v):
        return left + plot_w * v / hi
    # the grid first, so the bars lie over it
    body = (sum(len(g) * (bar + gap) - gap for g in groups) +
            group_gap * (len(groups) - 1))
    axis_top, axis_bottom = top - 8, top + body + 8
    for i in range(6):
        x = xpos(hi * i / 5)
        svg.line(x, axis_top, x, axis_bottom, color="#e4e4e4")
        svg.text(x, axis_bottom + 16, fmt_num(hi * i / 5), size=10,
                 anchor="middle")
    svg.line(left, axis_top, left, axis_bottom, color="#999")
    svg.text(left + plot_w / 2, axis_bottom + 34, "operations per second "
             "(median of the rounds)", size=11, anchor="middle")
    y = top
    for w, g in zip(workloads, groups):
        gh = len(g) * (bar + gap) - gap
        svg.text(left - 12, y + gh / 2 + 4, WORKLOAD_TITLE.get(w, w),
                 size=12, anchor="end", weight="bold")
        for r in g:
            svg.add('<rect x="%.1f" y="%.1f" width="%.1f" height="%d" '
                    'fill="%s"/>' % (left, y, max(xpos(r["ops"]) - left, 1),
                                     bar, COLORS[r["design"]]))
            svg.text(xpos(r["ops"]) + 5, y + bar - 4, "%s/s · p99 %s"
                     % (fmt_int(r["ops"]), fmt_ms(r["p99"])), size=11)
            y += bar + gap
        y += group_gap - gap
    with open(path, "w") as f:
        f.write(svg.render())


BACKLOG_SERIES = [("journal_backlog", "journal backlog (claims not yet "
                   "folded into the ledger)", "#1f6fd1", ""),
                  ("expired", "expired holds not yet given back", "#d1361f",
                   ""),
                  ("held", "units held by checkouts in flight", "#a8a8a8",
                   "5,3")]


def plot_backlog(src, path):
    """The record of tests/bench/sweep-backlog.sh: each series against
    time, the sweeps as dotted lines, the sale shaded."""
    samples, sweeps, notes, load = [], [], [], {}
    with open(src) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("# ") and not line.startswith("# wrk"):
                notes.append(line[2:])
            kv = dict(p.split("=", 1) for p in line.split() if "=" in p)
            if line.startswith("sample "):
                samples.append({k: float(v) for k, v in kv.items()})
            elif line.startswith("sweep "):
                sweeps.append(float(kv["t"]))
            elif line.startswith("load "):
                load[line.split()[1]] = float(kv["t"])
    if not samples:
        raise ValueError("no samples in %s" % src)
    left, top, pw, ph = 80, 112, 700, 280
    notes_wrapped = []
    for note in notes[1:]:
        words, cur = note.split(), ""
        for w in words:
            if len(cur) + len(w) > 125:
                notes_wrapped.append(cur)
                cur = ""
            cur = (cur + " " + w).strip()
        notes_wrapped.append(cur)
    width = left + pw + 30
    height = top + ph + 70 + 16 * len(notes_wrapped)
    svg = Svg(width, height)
    svg.text(width / 2, 24, "What the sweeper does: the journal and expired "
             "holds during a sale and after it", size=15, anchor="middle",
             weight="bold")
    sub = notes[0].split(": ", 1)[-1] if notes else ""
    svg.text(width / 2, 44, "recorded by tests/bench/sweep-backlog.sh, %s"
             % sub, size=11, anchor="middle", color="#555")
    for i, (_, title, color, dash) in enumerate(BACKLOG_SERIES):
        x = 40 + (i % 2) * (width / 2 - 20)
        y = 68 + 18 * (i // 2)
        svg.line(x, y - 4, x + 26, y - 4, color=color, width=2, dash=dash)
        svg.text(x + 32, y, title, size=12)
    t_max = max(max(sm["t"] for sm in samples), max(sweeps or [0]))
    x_step = 10 if t_max <= 120 else 60
    x_hi = math.ceil(t_max / x_step) * x_step
    y_hi = nice_max(max(sm.get(k, 0) for sm in samples
                        for k, _, _, _ in BACKLOG_SERIES) * 1.05)

    def xpos(t):
        return left + pw * t / x_hi

    def ypos(v):
        return top + ph - ph * v / y_hi
    if "start" in load and "end" in load:
        svg.add('<rect x="%.1f" y="%d" width="%.1f" height="%d" '
                'fill="#f2f5fb"/>' % (xpos(load["start"]), top,
                                      xpos(load["end"]) - xpos(load["start"]),
                                      ph))
        svg.text((xpos(load["start"]) + xpos(load["end"])) / 2, top + 16,
                 "the sale (wrk)", size=11, anchor="middle", color="#555")
    for i in range(6):
        v = y_hi * i / 5
        svg.line(left, ypos(v), left + pw, ypos(v), color="#e4e4e4")
        svg.text(left - 6, ypos(v) + 4, fmt_num(v), size=10, anchor="end")
    for t in range(0, int(x_hi) + 1, x_step):
        svg.text(xpos(t), top + ph + 16, str(t), size=10, anchor="middle")
    for t in sweeps:
        svg.line(xpos(t), top, xpos(t), top + ph, color="#555", dash="1,3")
    svg.add('<rect x="%d" y="%d" width="%d" height="%d" fill="none" '
            'stroke="#999"/>' % (left, top, pw, ph))
    for key, _, color, dash in BACKLOG_SERIES:
        svg.add('<polyline fill="none" stroke="%s" stroke-width="2"%s '
                'points="%s"/>' % (color, ' stroke-dasharray="%s"' % dash
                                   if dash else "",
                                   " ".join("%.1f,%.1f" % (xpos(sm["t"]),
                                                           ypos(sm.get(key, 0)))
                                            for sm in samples)))
    svg.text(left + pw / 2, top + ph + 34, "seconds; dotted lines: a run of "
             "rsv-admin sweep --all", size=11, anchor="middle")
    svg.text(left - 50, top + ph / 2, "rows / units", size=11,
             anchor="middle", rotate=-90)
    for i, note in enumerate(notes_wrapped):
        svg.text(left, top + ph + 62 + 16 * i, note, size=10, color="#555")
    with open(path, "w") as f:
        f.write(svg.render())


def rng(r, key):
    v = r.get(key)
    return "%d-%d" % v if v else "-"


def markdown(rows, text, path):
    out = []
    for config in ("binlog1", "binlog0", "semisync"):
        sel = [r for r in rows if r["config"] == config]
        if not sel:
            continue
        out += ["## %s" % CONFIG_TITLE[config], "",
                "| workload | clients | RTT | design | ops/s (median) | "
                "ops/s (min-max) | p50 µs | p99 µs (median) | p99 µs "
                "(min-max) | p99.9 µs |",
                "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|"]
        for r in sel:
            out.append("| %s | %d | %s | %s | %d | %s | %d | %d | %s | %d |"
                       % (r["workload"], r["clients"],
                          "local" if r["rtt"] == 0
                          else "%g ms" % (r["rtt"] / 1000.0),
                          r["design"], r["ops"], rng(r, "ops_per_s_range"),
                          r["p50"], r["p99"], rng(r, "p99_us_range"),
                          r["p999"]))
        out.append("")
    ratios = [l for l in text.splitlines() if l.startswith("ratio ")]
    if ratios:
        bases = [d for d in DESIGNS if d != "libreserve"]
        out += ["## Ratios (libreserve ÷ design, medians)", "",
                "| config | workload | clients | RTT | " +
                " | ".join("÷ %s" % d for d in bases) +
                " | p99 ÷ hotrow-1rt | p99 ÷ floor-1rt |",
                "|---|---|---:|---:|" + "---:|" * (len(bases) + 2)]
        for l in ratios:
            kv = dict(p.split("=", 1) for p in l.split()[1:] if "=" in p)
            rtt = int(kv.get("rtt_us", "0"))
            config = config_of(kv.get("binlog", "1"), kv.get("semisync"))
            out.append("| %s | %s | %s | %s | %s | %s | %s |" % (
                config, kv.get("workload"), kv.get("clients"),
                "local" if rtt == 0 else "%g ms" % (rtt / 1000.0),
                " | ".join(kv.get("libreserve/%s" % d, "-") for d in bases),
                kv.get("p99_libreserve/hotrow-1rt", "-"),
                kv.get("p99_libreserve/floor-1rt", "-")))
    extra = [l for l in text.splitlines()
             if l.startswith(("target ", "check ", "# semisync ")) and
             "window:" not in l]
    if extra:
        out += [""] + ["    " + t for t in extra]
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def main():
    if len(sys.argv) == 4 and sys.argv[1] in ("--headline", "--backlog",
                                              "--crowd"):
        src, out = sys.argv[2], sys.argv[3]
        if sys.argv[1] == "--backlog":
            plot_backlog(src, out)
        elif sys.argv[1] == "--crowd":
            rows = [r for r in parse(src)
                    if r["workload"] == "flash1" and r["config"] == "binlog1"]
            if not rows:
                sys.stderr.write("plot.py: no flash1 lines in %s\n" % src)
                return 1
            plot_workload(rows, "flash1", "binlog1", out)
        else:
            with open(src) as f:
                plot_headline(parse(src), f.read(), out)
        print("plot.py: wrote %s" % out)
        return 0
    if len(sys.argv) != 3:
        sys.stderr.write(__doc__)
        return 2
    src, outdir = sys.argv[1], sys.argv[2]
    rows = parse(src)
    if not rows:
        sys.stderr.write("plot.py: no bench lines in %s\n" % src)
        return 1
    with open(src) as f:
        text = f.read()
    os.makedirs(outdir, exist_ok=True)
    written = []
    for config in sorted({r["config"] for r in rows}):
        suffix = "" if config == "binlog1" else "-" + config
        crows = [r for r in rows if r["config"] == config]
        for w in sorted({r["workload"] for r in crows}):
            sel = [r for r in crows if r["workload"] == w]
            if len({r["clients"] for r in sel}) < 2 and w != "flash1":
                continue
            path = os.path.join(outdir, "bench-%s%s.svg" % (w, suffix))
            plot_workload(sel, w, config, path)
            written.append(path)
            if w == "flash1" and config == "binlog1":
                main_path = os.path.join(outdir, "bench.svg")
                plot_workload(sel, w, config, main_path)
                written.append(main_path)
    md = os.path.join(outdir, "results.md")
    markdown(rows, text, md)
    written.append(md)
    for p in written:
        print("plot.py: wrote %s" % p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
