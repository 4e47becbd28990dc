#!/usr/bin/env python3
"""SVG charts of BENCHMARKS.md's key comparisons, drawn from what the runs measured.

    python3 scripts/loadrun/charts.py versus target/load/versus.json [--out docs/charts/versus.svg]
    python3 scripts/loadrun/charts.py deep-pages growth.json|growth.md|- [--out docs/charts/deep-pages.svg]
    python3 scripts/loadrun/charts.py failover target/load/failover.json [--out docs/charts/failover.svg]

`versus_chart`, `deep_pages_chart` and `failover_chart` take what `load.py --versus`,
`cargo run --release --example growth` and `load.py --failover` produce (each function
says the shape) and write one SVG. The SVGs stand alone: standard library only, no
external fonts, stylesheets or scripts (GitHub shows them as images), a white
background for dark themes, a `<title>` and `<desc>` for screen readers and a `<title>`
tooltip on every bar.
"""

import argparse
import json
import math
import os
import statistics
import sys
from xml.sax.saxutils import escape, quoteattr

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHARTS = os.path.join(ROOT, "docs", "charts")
FONT = "-apple-system, 'Segoe UI', Helvetica, Arial, sans-serif"
# Okabe-Ito: told apart with the common colour-vision deficiencies.
STORES = {"sqlite": ("SQLite", "#0072B2"), "postgres": ("PostgreSQL", "#E69F00"),
          "mysql": ("MariaDB", "#009E73"), "memory": ("memory", "#CC79A7")}
STATUSES = (("200", "#56B4E9"), ("201", "#009E73"), ("503", "#E69F00"), ("other", "#D55E00"))
INK, GRID, MUTED = "#24292f", "#d0d7de", "#57606a"


class Svg:
    """An SVG drawn element by element; `text` measures nothing, so layouts leave room
    by `width_of` (about 0.6 em a character)."""

    def __init__(self, width, height, title, desc):
        self.width, self.height, self.parts = width, height, []
        self.head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
                     f'viewBox="0 0 {width} {height}" role="img" aria-labelledby="chart-title chart-desc" '
                     f'font-family="{FONT}" font-size="12" fill="{INK}">\n'
                     f'<title id="chart-title">{escape(title)}</title>\n<desc id="chart-desc">{escape(desc)}</desc>\n'
                     f'<rect width="100%" height="100%" fill="#ffffff"/>\n')

    def add(self, element, tooltip=None, **attrs):
        """One element; `tooltip` becomes its `<title>` (shown on hover)."""
        text = " ".join(f"{k.rstrip('_').replace('_', '-')}={quoteattr(str(v))}" for k, v in attrs.items())
        if tooltip:
            self.parts.append(f"<{element} {text}><title>{escape(tooltip)}</title></{element}>")
        else:
            self.parts.append(f"<{element} {text}/>")

    def text(self, x, y, content, size=12, anchor="start", weight="normal", fill=INK, halo=False, **attrs):
        """Text at (x, y); with `halo`, a white outline keeps it readable over lines and bars."""
        if halo:
            attrs.update(stroke="#ffffff", stroke_width=3, stroke_linejoin="round", paint_order="stroke")
        extra = "".join(f" {k.replace('_', '-')}={quoteattr(str(v))}" for k, v in attrs.items())
        self.parts.append(f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" '
                          f'font-weight="{weight}" fill="{fill}"{extra}>{escape(content)}</text>')

    def line(self, x1, y1, x2, y2, stroke=GRID, width=1, dash=None):
        self.add("line", x1=f"{x1:.1f}", y1=f"{y1:.1f}", x2=f"{x2:.1f}", y2=f"{y2:.1f}", stroke=stroke,
                 stroke_width=width, **({"stroke_dasharray": dash} if dash else {}))

    def rect(self, x, y, w, h, fill, tooltip=None, **attrs):
        self.add("rect", tooltip, x=f"{x:.1f}", y=f"{y:.1f}", width=f"{max(w, 0):.1f}", height=f"{max(h, 0):.1f}",
                 fill=fill, **attrs)

    def heading(self, title, subtitle):
        self.text(16, 26, title, size=16, weight="bold")
        self.text(16, 45, subtitle, fill=MUTED)

    def legend(self, x, y, entries):
        """Swatches in a row: (label, rect attributes)."""
        for label, attrs in entries:
            self.rect(x, y - 9, 12, 12, **attrs)
            self.text(x + 17, y + 1, label)
            x += 17 + width_of(label) + 18

    def save(self, path):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.head + "\n".join(self.parts) + "\n</svg>\n")


def width_of(text, size=12):
    """About how wide `text` sets in the sans-serif fonts above."""
    return len(text) * size * 0.6


def nice_ticks(top, count=5):
    """Round steps (1, 2, 2.5 or 5 times a power of ten) from 0 to at least `top`."""
    if top <= 0:
        return [0, 1]
    raw = top / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    return [i * step for i in range(math.ceil(top / step - 1e-9) + 1)]


def log_ticks(low, high):
    """1-2-5 ticks from the last at or under `low` to the last at or under `high`."""
    ticks, power = [], 10 ** math.floor(math.log10(low))
    while not ticks or ticks[-1] < high:
        ticks += [m * power for m in (1, 2, 5)]
        power *= 10
    first = max(i for i, t in enumerate(ticks) if t <= low)
    return [t for t in ticks[first:] if t <= high]


def times(ratio):
    """A ratio as BENCHMARKS.md writes it: 0.77x, 1.60x, 12.6x, 775x."""
    return f"{ratio:.{0 if ratio >= 100 else 1 if ratio >= 10 else 2}f}x"


def label(number):
    """A tick's label: 0.5, 1, 2.5, 10, 1,000."""
    return f"{number:,.0f}" if number >= 10 or number == int(number) else f"{number:g}"


def store_name(store):
    return STORES.get(store, (store, MUTED))[0]


# --- ours against the hand-written server -------------------------------------------------


def versus_ratios(runs):
    """{server: median over rounds of its req/s / the hand-written server's in the same
    round} for one workload's `{server: [measure, ...]}`, as the --versus table."""
    hand = runs["handwritten"]
    return {server: statistics.median(a["rps"] / b["rps"] for a, b in zip(rs, hand))
            for server, rs in runs.items() if server != "handwritten"}


def versus_chart(results, path):
    """Ours / hand-written throughput per workload and database, as `load.py --versus`
    writes it to target/load/versus*.json:

        {"books": 1000, "rounds": 3, "seconds": 4, "push": false, "cache_off": false,
         "stores": {"sqlite": {"ping": {"ours": [measure, ...], "handwritten": [...],
                                        "bare hyper": [...], "before": [...]}, ...}, ...}}

    where a measure is `harness.measure`'s dict (only "rps" is read) and the servers
    other than "ours" and "handwritten" are there when the run had them. Bars are the
    median of per-round ratios on a log axis; 1x is the hand-written server."""
    stores = results["stores"]
    workloads = list(dict.fromkeys(w for runs in stores.values() for w in runs))
    servers = list(dict.fromkeys(s for runs in stores.values() for w in runs.values() for s in w
                                 if s != "handwritten"))
    # Our server solid, an older binary paler, bare hyper (what no server beats) hollow.
    styles = {"ours": {}, "before": {"fill_opacity": "0.45"},
              "bare hyper": {"fill_opacity": "0.12", "stroke_width": "1.5"}}
    bars = []  # (workload, store, server, ratio, tooltip)
    for workload in workloads:
        for store, runs in stores.items():
            if workload not in runs:
                continue
            ratios = versus_ratios(runs[workload])
            hand = statistics.median(r["rps"] for r in runs[workload]["handwritten"])
            for server in servers:
                if server in ratios:
                    mine = statistics.median(r["rps"] for r in runs[workload][server])
                    tip = (f"{store_name(store)}, {workload}, {server}: {times(ratios[server])} the hand-written "
                           f"server ({mine:,.0f} against {hand:,.0f} req/s, medians)")
                    bars.append((workload, store, server, ratios[server], tip))
    low = min([0.8] + [b[3] for b in bars])
    high = max([1.5] + [b[3] for b in bars]) * 1.1
    ticks = log_ticks(low, high)
    left, plot_w, bar_h, gap = 20 + max(width_of(w, 13) for w in workloads), 560, 14, 14
    rows = len(bars) * (bar_h + 3) + len(workloads) * gap
    top, height = 92, 92 + rows + 60
    width = int(left + plot_w + 80)
    mode = ", ".join(m for m, on in (("our cache off", results.get("cache_off")),
                                     ("PostgreSQL push mode", results.get("push"))) if on)
    subtitle = (f"Throughput, ours / hand-written axum + sqlx; median of {results.get('rounds', '?')} rounds × "
                f"{results.get('seconds', '?')} s; {results.get('books', 0):,} books to start"
                + (f"; {mode}" if mode else ""))
    svg = Svg(width, height, "Our server against a hand-written axum + sqlx server",
              subtitle + ". " + "; ".join(b[4] for b in bars) + ".")
    svg.heading("Our server against a hand-written axum + sqlx server", subtitle)
    entries = [(store_name(s), {"fill": STORES.get(s, (s, MUTED))[1]}) for s in stores]
    if servers != ["ours"]:
        entries += [(s, {"fill": MUTED, "stroke": MUTED, **styles.get(s, {"fill_opacity": "0.7"})})
                    for s in servers]
    svg.legend(16, 70, entries)
    x = lambda v: left + plot_w * math.log(v / ticks[0]) / math.log(high / ticks[0])
    for t in ticks:
        svg.line(x(t), top - 6, x(t), top + rows, stroke=GRID)
        svg.text(x(t), top + rows + 16, label(t) + "x", anchor="middle", fill=MUTED)
    svg.line(x(1), top - 10, x(1), top + rows, stroke=INK, width=1.5)
    svg.text(x(1) + 4, top - 2, "hand-written = 1x", size=11, fill=MUTED)
    svg.text(left + plot_w / 2, top + rows + 36, "throughput relative to the hand-written server (log scale)",
             anchor="middle")
    y = top
    for workload in workloads:
        mine = [b for b in bars if b[0] == workload]
        y += gap / 2
        svg.text(left - 10, y + len(mine) * (bar_h + 3) / 2 + 3, workload, size=13, anchor="end")
        for _, store, server, ratio, tip in mine:
            colour = STORES.get(store, (store, MUTED))[1]
            start, end = sorted((x(1), x(ratio)))
            svg.rect(start, y, end - start, bar_h, colour, tip, stroke=colour,
                     **styles.get(server, {"fill_opacity": "0.7"}))
            svg.text(max(x(1), x(ratio)) + 4, y + bar_h - 3, times(ratio), size=11)
            y += bar_h + 3
        y += gap / 2
    svg.save(path)


# --- deep pages against page 1 -------------------------------------------------------------


def growth_rows(text):
    """The rows of the table `cargo run --release --example growth` prints:
    [{"store", "books", "page_1_ms", "last_page_ms", "get_one_ms", "create_ms"}, ...]."""
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 6 and cells[1].replace(",", "").isdigit():
            rows.append({"store": cells[0], "books": int(cells[1].replace(",", "")),
                         **{k: float(v) for k, v in zip(("page_1_ms", "last_page_ms", "get_one_ms", "create_ms"),
                                                        cells[2:])}})
    return rows


def deep_pages_chart(results, path):
    """The last page against list page 1 at the largest size each store was grown to,
    from the growth example's rows (`growth_rows`):

        [{"store": "SQLite", "books": 1000200, "page_1_ms": 0.085, "last_page_ms": 0.136,
          "get_one_ms": 0.033, "create_ms": 0.298}, ...]

    Milliseconds per request through the API, cache off, with the 2x goal marked."""
    largest = {}
    for row in results:
        if row["books"] >= largest.get(row["store"], {"books": -1})["books"]:
            largest[row["store"]] = row
    rows = list(largest.values())
    left, plot_w, bar_h = 40 + max(width_of(r["store"], 13) for r in rows), 520, 18
    ticks = nice_ticks(max(max(r["last_page_ms"], 2 * r["page_1_ms"]) for r in rows) * 1.05)
    group = 2 * bar_h + 4 + 22
    top = 92
    plot_h = len(rows) * group
    width, height = int(left + plot_w + 110), top + plot_h + 60
    books = sorted({r["books"] for r in rows})
    subtitle = (f"ms per request through the API (median), cache off, at {', '.join(f'{b:,}' for b in books)} "
                "books, 20 a page")
    desc = "; ".join(f"{r['store']}: page 1 {r['page_1_ms']} ms, last page {r['last_page_ms']} ms, "
                     f"{times(r['last_page_ms'] / r['page_1_ms'])}" for r in rows)
    svg = Svg(width, height, "The last page against page 1", subtitle + ". " + desc + ".")
    svg.heading("The last page against page 1", subtitle)
    svg.legend(16, 70, [("page 1", {"fill": "#56B4E9"}), ("last page", {"fill": "#0072B2"})])
    svg.line(16 + 190, 66, 16 + 210, 66, stroke="#D55E00", width=2, dash="4 3")
    svg.text(16 + 215, 71, "goal: 2x page 1")
    x = lambda v: left + plot_w * v / ticks[-1]
    for t in ticks:
        svg.line(x(t), top, x(t), top + plot_h, stroke=GRID)
        svg.text(x(t), top + plot_h + 16, f"{t:g}", anchor="middle", fill=MUTED)
    svg.text(left + plot_w / 2, top + plot_h + 36, "milliseconds per request (median)", anchor="middle")
    for i, r in enumerate(rows):
        y = top + 11 + i * group
        ratio = r["last_page_ms"] / r["page_1_ms"]
        svg.text(left - 10, y + bar_h + 5, r["store"], size=13, anchor="end")
        svg.rect(x(0), y, x(r["page_1_ms"]) - x(0), bar_h, "#56B4E9",
                 f"{r['store']}, {r['books']:,} books: page 1 in {r['page_1_ms']} ms")
        svg.text(x(r["page_1_ms"]) + 4, y + bar_h - 5, f"{r['page_1_ms']:g} ms", size=11)
        svg.rect(x(0), y + bar_h + 4, x(r["last_page_ms"]) - x(0), bar_h, "#0072B2",
                 f"{r['store']}, {r['books']:,} books: the last page in {r['last_page_ms']} ms, "
                 f"{times(ratio)} page 1")
        # The goal crosses the last page's bar; the figure goes past both.
        goal = x(2 * r["page_1_ms"])
        svg.line(goal, y + bar_h + 1, goal, y + 2 * bar_h + 7, stroke="#D55E00", width=2, dash="4 3")
        svg.text(max(x(r["last_page_ms"]), goal) + 6, y + 2 * bar_h, f"{r['last_page_ms']:g} ms: {times(ratio)}",
                 size=11, weight="bold")
    svg.save(path)


# --- the failover run ---------------------------------------------------------------------


def failover_chart(results, path):
    """Answers per second by status around each event, one panel per run, from
    `load.py --failover`'s list of runs (target/load/failover.json):

        [{"event": "pg-kill", "binary": "books-api", "start": t0, "event_at": t1,
          "accepting": t2, "first_201": 0.03 or null,
          "seconds": {"0": {"200": 812, "201": 95}, "1": {...}, ...},
          "bare_503": 0, "acknowledged": 1200, "missing": 0, "twice": 0, "stale": 0,
          "totals_off": 0}, ...]

    (times are Unix seconds; keys may be ints, as before the JSON round trip). Status 0
    (no connection) counts as "other"."""
    runs = []
    for r in results:
        seconds = {int(s): {str(k): n for k, n in counts.items()} for s, counts in r["seconds"].items()}
        runs.append((r, seconds))
    span = max([max(s, default=0) + 1 for _, s in runs] + [1])
    top_count = max([sum(c.values()) for _, s in runs for c in s.values()] + [1])
    ticks = nice_ticks(top_count, 4)
    # Each panel: its heading, the end check, a band for the marks' labels, the plot, its axis.
    left, plot_w, panel_h, top, above, below = 64, 660, 140, 84, 84, 52
    width, height = left + plot_w + 24, top + len(runs) * (above + panel_h + below)
    title = "Answers per second through a failover"
    subtitle = "Each second's answers by status, the event, and the first write another node accepted"
    desc = "; ".join(f"{r['event']} with {r['binary']}: event at {r['event_at'] - r['start']:.1f} s, accepting at "
                     f"{r['accepting'] - r['start']:.1f} s, {r['missing']} acknowledged creates missing"
                     for r, _ in runs)
    svg = Svg(width, height, title, subtitle + ". " + desc + ".")
    svg.heading(title, subtitle)
    svg.legend(16, 68, [(s if s != "other" else "other (0: no connection)", {"fill": c}) for s, c in STATUSES])
    x = lambda s: left + plot_w * s / span
    for i, (r, seconds) in enumerate(runs):
        y0 = top + above + i * (above + panel_h + below)
        first = "never" if r.get("first_201") is None else f"{r['first_201']:.2f} s"
        svg.text(16, y0 - above + 18, f"{r['event']}, {r['binary']}", size=14, weight="bold")
        svg.text(16, y0 - above + 35,
                 f"{r['acknowledged']:,} creates acknowledged: {r['missing']} missing, {r['twice']} twice, "
                 f"{r['stale']} stale read-backs, {r['bare_503']} 503s without Retry-After, "
                 f"{r['totals_off']} totals off; accepting → first 201: {first}", size=11, fill=MUTED)
        y = lambda n: y0 + panel_h - panel_h * n / ticks[-1]
        for t in ticks:
            svg.line(left, y(t), left + plot_w, y(t), stroke=GRID)
            svg.text(left - 6, y(t) + 4, f"{t:,.0f}", anchor="end", fill=MUTED, size=11)
        for s in nice_ticks(span, 10):
            if s <= span:
                svg.text(x(s), y0 + panel_h + 15, f"{s:g}", anchor="middle", fill=MUTED, size=11)
        svg.text(left + plot_w / 2, y0 + panel_h + 31, "seconds from the start of the run", anchor="middle",
                 size=11)
        svg.text(16, y0 + panel_h / 2, "answers / s", size=11, anchor="middle",
                 transform=f"rotate(-90 16 {y0 + panel_h / 2:.1f})")
        for second, counts in sorted(seconds.items()):
            known = {s for s, _ in STATUSES[:3]}
            parts = [(s, counts.get(s, 0)) for s, _ in STATUSES[:3]]
            parts.append(("other", sum(n for s, n in counts.items() if s not in known)))
            tip = f"second {second}: " + ", ".join(f"{n:,} × {s}" for s, n in parts if n)
            base = 0
            for (status, n), (_, colour) in zip(parts, STATUSES):
                if n:
                    svg.rect(x(second) + 0.5, y(base + n), x(1) - x(0) - 1, y(base) - y(base + n), colour, tip)
                    base += n
        marks = [("event", r["event_at"], INK, None), ("accepting", r["accepting"], "#8250df", "5 3")]
        if r.get("first_201") is not None:
            marks.append(("first 201", r["accepting"] + r["first_201"], "#bf3989", "2 2"))
        ends = []  # where each row of labels above the plot ends so far
        for name, at, colour, dash in marks:
            pos, text = x(at - r["start"]), f"{name} {at - r['start']:.1f} s"
            # A label that would run into the one before it goes on the row above.
            row = next((n for n, end in enumerate(ends) if end < pos), len(ends))
            ends[row:row + 1] = [pos + 4 + width_of(text, 11) + 6]
            svg.line(pos, y0 - 8 - row * 13, pos, y0 + panel_h, stroke=colour, width=2, dash=dash)
            svg.text(pos + 4, y0 - 5 - row * 13, text, size=11, fill=colour, weight="bold", halo=True)
        svg.line(left, y0 + panel_h, left + plot_w, y0 + panel_h, stroke=INK)
    svg.save(path)


CHARTS_BY_NAME = {"versus": versus_chart, "deep-pages": deep_pages_chart, "failover": failover_chart}


def main():
    parser = argparse.ArgumentParser(description="Draws a chart from a run's saved results.")
    parser.add_argument("chart", choices=CHARTS_BY_NAME)
    parser.add_argument("results", help="the run's JSON; for deep-pages also the growth example's table, "
                        "or - to read it from stdin and print it through")
    parser.add_argument("--out", help="default docs/charts/<chart>.svg")
    args = parser.parse_args()
    if args.results == "-":
        # Passed through as it comes, so a piped run's table still shows while it runs.
        lines = []
        for line in sys.stdin:
            sys.stdout.write(line)
            sys.stdout.flush()
            lines.append(line)
        text = "".join(lines)
    else:
        with open(args.results, encoding="utf-8") as f:
            text = f.read()
    try:
        results = json.loads(text)
    except json.JSONDecodeError:
        if args.chart != "deep-pages":
            raise
        results = growth_rows(text)
    if not results:
        sys.exit(f"charts.py: no results in {args.results}")
    out = args.out or os.path.join(CHARTS, f"{args.chart}.svg")
    CHARTS_BY_NAME[args.chart](results, out)
    print(f"wrote {os.path.relpath(out)}", file=sys.stderr)


if __name__ == "__main__":
    main()
