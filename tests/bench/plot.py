#!/usr/bin/env python3
"""Plots of the benchmark results, as hand-written SVG (plain python3).

Usage: plot.py RESULTS.txt OUTDIR

Reads the 'bench design=... workload=... clients=... rtt_us=... ops_per_s=...
p50_us=... p99_us=... p999_us=...' lines of a bench run and writes, for every
workload measured at two or more client counts, OUTDIR/bench-WORKLOAD.svg:
throughput and p99 latency against clients, one line per design, one row of
panels per round-trip time.  OUTDIR/bench.svg is the flash-sale plot.  It
also writes OUTDIR/results.md, the measurements and ratios as Markdown
tables.
"""
import math
import os
import re
import sys

DESIGNS = ["libreserve", "hotrow", "floor"]
COLORS = {"libreserve": "#1f6fd1", "hotrow": "#d1361f", "floor": "#6b6b6b"}
DASH = {"libreserve": "", "hotrow": "6,3", "floor": "2,3"}

LINE = re.compile(
    r"^bench design=(\S+) workload=(\S+) clients=(\d+) rtt_us=(\d+) "
    r"ops_per_s=(\d+) p50_us=(\d+) p99_us=(\d+) p999_us=(\d+)\s*$")


def parse(path):
    rows = []
    with open(path) as f:
        for line in f:
            m = LINE.match(line)
            if m:
                d, w, c, r, ops, p50, p99, p999 = m.groups()
                rows.append(dict(design=d, workload=w, clients=int(c),
                                 rtt=int(r), ops=int(ops), p50=int(p50),
                                 p99=int(p99), p999=int(p999)))
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
    """series: {design: [(clients, value)]}"""
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
    vals = [v for pts in series.values() for _, v in pts if v > 0]
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
    svg.text(x0 + w / 2, y0 + h + 32, "client threads (one connection each)",
             size=11, anchor="middle")
    svg.text(x0 - 46, y0 + h / 2, ylabel, size=11, anchor="middle",
             rotate=-90)
    for d in DESIGNS:
        pts = sorted(series.get(d, []))
        if not pts:
            continue
        coords = [(xpos[c], ypos(v)) for c, v in pts if c in xpos]
        if len(coords) > 1:
            svg.add('<polyline fill="none" stroke="%s" stroke-width="2"%s '
                    'points="%s"/>' % (
                        COLORS[d],
                        ' stroke-dasharray="%s"' % DASH[d] if DASH[d] else "",
                        " ".join("%.1f,%.1f" % p for p in coords)))
        for x, y in coords:
            svg.add('<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"/>'
                    % (x, y, COLORS[d]))


def dedupe(rows):
    """The last measurement of each (design, workload, clients, rtt)."""
    seen = {}
    for r in rows:
        seen[(r["design"], r["workload"], r["clients"], r["rtt"])] = r
    return list(seen.values())


def plot_workload(rows, workload, path):
    rows = dedupe(rows)
    rtts = sorted({r["rtt"] for r in rows})
    clients = sorted({r["clients"] for r in rows})
    pw, ph = 380, 240
    left, top, gapx, gapy = 80, 80, 110, 110
    width = left + 2 * pw + gapx + 40
    height = top + len(rtts) * (ph + gapy) + 10
    svg = Svg(width, height)
    svg.text(width / 2, 26, "libreserve benchmark: %s" % workload, size=16,
             anchor="middle", weight="bold")
    # legend
    lx = width / 2 - 170
    for i, d in enumerate(DESIGNS):
        x = lx + i * 120
        svg.line(x, 48, x + 28, 48, color=COLORS[d], width=2, dash=DASH[d])
        svg.add('<circle cx="%.1f" cy="48" r="3.5" fill="%s"/>'
                % (x + 14, COLORS[d]))
        svg.text(x + 34, 52, d, size=12)
    for i, rtt in enumerate(rtts):
        y0 = top + i * (ph + gapy)
        net = "local socket" if rtt == 0 else "%.1f ms RTT" % (rtt / 1000.0)
        sel = [r for r in rows if r["rtt"] == rtt]
        thr = {d: [(r["clients"], r["ops"]) for r in sel if r["design"] == d]
               for d in DESIGNS}
        p99 = {d: [(r["clients"], r["p99"] / 1000.0) for r in sel
                   if r["design"] == d] for d in DESIGNS}
        panel(svg, left, y0, pw, ph, "throughput, %s" % net, clients, thr,
              "operations / s", log=False)
        panel(svg, left + pw + gapx, y0, pw, ph, "p99 latency, %s" % net,
              clients, p99, "p99 (ms, log scale)", log=True)
    with open(path, "w") as f:
        f.write(svg.render())


def markdown(rows, text, path):
    out = ["| workload | clients | RTT | design | ops/s | p50 µs | p99 µs | "
           "p99.9 µs |", "|---|---:|---:|---|---:|---:|---:|---:|"]
    for r in rows:
        out.append("| %s | %d | %s | %s | %d | %d | %d | %d |" % (
            r["workload"], r["clients"],
            "local" if r["rtt"] == 0 else "%g ms" % (r["rtt"] / 1000.0),
            r["design"], r["ops"], r["p50"], r["p99"], r["p999"]))
    ratios = [l for l in text.splitlines() if l.startswith("ratio ")]
    if ratios:
        out += ["", "| workload | clients | RTT | libreserve/hotrow | "
                "libreserve/floor | p99 libreserve/floor |",
                "|---|---:|---:|---:|---:|---:|"]
        for l in ratios:
            kv = dict(p.split("=", 1) for p in l.split()[1:] if "=" in p)
            rtt = int(kv.get("rtt_us", "0"))
            out.append("| %s | %s | %s | %s | %s | %s |" % (
                kv.get("workload"), kv.get("clients"),
                "local" if rtt == 0 else "%g ms" % (rtt / 1000.0),
                kv.get("libreserve/hotrow", "-"),
                kv.get("libreserve/floor", "-"),
                kv.get("p99_libreserve/floor", "-")))
    targets = [l for l in text.splitlines() if l.startswith("target ")]
    if targets:
        out += [""] + ["    " + t for t in targets]
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def main():
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
    for w in sorted({r["workload"] for r in rows}):
        sel = [r for r in rows if r["workload"] == w]
        if len({r["clients"] for r in sel}) < 2 and w != "flash1":
            continue
        path = os.path.join(outdir, "bench-%s.svg" % w)
        plot_workload(sel, w, path)
        written.append(path)
        if w == "flash1":
            main_path = os.path.join(outdir, "bench.svg")
            plot_workload(sel, w, main_path)
            written.append(main_path)
    md = os.path.join(outdir, "results.md")
    markdown(rows, text, md)
    written.append(md)
    for p in written:
        print("plot.py: wrote %s" % p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
