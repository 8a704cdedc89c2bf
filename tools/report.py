#!/usr/bin/env python3
"""The demo's report: a table and a one-line verdict per section, as text and as HTML.

  tools/report.py RESULTS_DIR [--html FILE]

RESULTS_DIR holds one folder per section (memory/, durable/, ...) of bench JSON results
(tools/bench.sh --json) and the section's charts from tools/plot.sh --name SECTION
(SECTION-throughput.svg, ...). Prints, per section, the table and a summary such as
"rdma vs tcp: 2.1x IOPS at 4K, 4.0x lower p50, 1.8x less OSD CPU per GiB". With --html,
also writes a self-contained page (tables + the SVG charts inline, no external assets)
whose script marks, once laid out, how many tables and charts rendered with a size:
<body data-rendered="tables=N charts=M"> (the headless-browser test reads it).
Exit status: 0 ok, 1 no results, 2 bad arguments.
"""
import html
import json
import os
import sys

SECTION_ORDER = ["memory", "buffered", "durable"]
SECTION_TITLES = {
    "memory": "memory mode: the messenger alone (objects kept in RAM)",
    "buffered": "buffered mode (page cache)",
    "durable": "durable mode: every write on disk (fdatasync) before its ack",
}
CHARTS = [("throughput", "Throughput"), ("iops", "IOPS"), ("latency_cdf", "Latency CDF"),
          ("cpu", "CPU per GiB written")]


def human(n):
    for unit, div in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div}{unit}"
    return str(n)


def load_sections(results):
    sections = {}
    for name in sorted(os.listdir(results)):
        d = os.path.join(results, name)
        if not os.path.isdir(d):
            continue
        rows = []
        for f in sorted(os.listdir(d)):
            if f.endswith(".json"):
                with open(os.path.join(d, f)) as fh:
                    r = json.load(fh)
                if r.get("mode", "write") == "write":
                    rows.append(r)
        if rows:
            sections[name] = rows
    order = [s for s in SECTION_ORDER if s in sections] + \
            [s for s in sections if s not in SECTION_ORDER]
    return [(s, sections[s]) for s in order]


def verify_text(v):
    if not v or not v.get("enabled"):
        return "not run"
    bad = v.get("mismatches", 0)
    return f"{v.get('checked', 0) - bad} ok, {bad} bad"


def cell(r, key, sub=None):
    v = r.get(key)
    if sub is not None:
        v = (v or {}).get(sub)
    return v


def table_rows(rows):
    """(header, [row cells]) sorted by size then backend (tcp first)."""
    header = ["size", "backend", "MB/s", "IOPS", "p50 us", "p99 us", "OSD CPU-s/GiB",
              "client CPU-s/GiB", "verify"]
    out = []
    key = lambda r: (r["object_size"], r["ms_type"] != "tcp", r["ms_type"])
    for r in sorted(rows, key=key):
        def fmt(v, spec):
            return "-" if v is None else format(v, spec)
        out.append([human(r["object_size"]), r["ms_type"], fmt(r.get("mb_per_s"), ".1f"),
                    fmt(r.get("iops"), ".0f"), fmt(cell(r, "lat_us", "p50"), ".0f"),
                    fmt(cell(r, "lat_us", "p99"), ".0f"),
                    fmt(cell(r, "cpu_s_per_gb", "osds"), ".2f"),
                    fmt(cell(r, "cpu_s_per_gb", "client"), ".2f"), verify_text(r.get("verify"))])
    return header, out


def ratio(a, b):
    return None if not a or not b else a / b


def summary(rows):
    """rdma vs tcp at the smallest size (and throughput at the largest), or None."""
    by = {(r["ms_type"], r["object_size"]): r for r in rows}
    sizes = sorted({r["object_size"] for r in rows if ("tcp", r["object_size"]) in by and
                    ("rdma", r["object_size"]) in by})
    if not sizes:
        return None
    s = sizes[0]
    t, d = by[("tcp", s)], by[("rdma", s)]
    parts = []
    x = ratio(d.get("iops"), t.get("iops"))
    if x:
        parts.append(f"{x:.2f}x IOPS at {human(s)}")
    x = ratio(cell(t, "lat_us", "p50"), cell(d, "lat_us", "p50"))
    if x:
        parts.append(f"{x:.2f}x lower p50" if x >= 1 else f"{1 / x:.2f}x higher p50")
    x = ratio(cell(t, "cpu_s_per_gb", "osds"), cell(d, "cpu_s_per_gb", "osds"))
    if x:
        parts.append(f"{x:.2f}x less OSD CPU per GiB" if x >= 1
                     else f"{1 / x:.2f}x more OSD CPU per GiB")
    if len(sizes) > 1:
        big = sizes[-1]
        x = ratio(by[("rdma", big)].get("mb_per_s"), by[("tcp", big)].get("mb_per_s"))
        if x:
            parts.append(f"{x:.2f}x MB/s at {human(big)}")
    return "rdma vs tcp: " + ", ".join(parts) if parts else None


def text_report(sections):
    out = []
    for name, rows in sections:
        header, body = table_rows(rows)
        widths = [max(len(h), *(len(r[i]) for r in body)) for i, h in enumerate(header)]
        out.append(f"== {SECTION_TITLES.get(name, name)}")
        out.append("  ".join(h.rjust(w) for h, w in zip(header, widths)))
        for r in body:
            out.append("  ".join(c.rjust(w) for c, w in zip(r, widths)))
        line = summary(rows)
        if line:
            out.append(line)
        out.append("")
    return "\n".join(out)


def inline_svg(path):
    """The SVG element of a file, without its XML prolog and doctype."""
    with open(path) as fh:
        text = fh.read()
    start = text.find("<svg")
    return text[start:] if start >= 0 else ""


PAGE_SCRIPT = """
window.addEventListener('load', function () {
  var tables = 0, charts = 0;
  document.querySelectorAll('table').forEach(function (t) {
    if (t.getBoundingClientRect().height > 0 && t.rows.length > 1) tables++;
  });
  document.querySelectorAll('figure svg').forEach(function (s) {
    var b = s.getBBox();
    if (b.width > 0 && b.height > 0 && s.querySelectorAll('path').length > 0) charts++;
  });
  document.body.setAttribute('data-rendered', 'tables=' + tables + ' charts=' + charts);
});
"""

STYLE = """
body { font-family: sans-serif; margin: 2em; color: #222; max-width: 1100px; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th { background: #f3f3f3; }
.summary { font-weight: bold; margin: 0.5em 0 1em; }
figure { display: inline-block; margin: 0.5em; width: 520px; }
figure svg { width: 100%; height: auto; }
figcaption { text-align: center; font-size: 0.9em; }
"""


def html_report(results, sections, meta):
    e = html.escape
    body = [f"<h1>msgr demo: rdma vs tcp</h1><p>{e(meta)}</p>"]
    for name, rows in sections:
        header, rows_ = table_rows(rows)
        body.append(f"<h2>{e(SECTION_TITLES.get(name, name))}</h2>")
        line = summary(rows)
        if line:
            body.append(f'<p class="summary">{e(line)}</p>')
        body.append("<table><tr>" + "".join(f"<th>{e(h)}</th>" for h in header) + "</tr>")
        for r in rows_:
            body.append("<tr>" + "".join(f"<td>{e(c)}</td>" for c in r) + "</tr>")
        body.append("</table>")
        for chart, caption in CHARTS:
            path = os.path.join(results, f"{name}-{chart}.svg")
            if os.path.exists(path):
                body.append(f"<figure>{inline_svg(path)}<figcaption>{e(caption)}</figcaption>"
                            "</figure>")
    return ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>msgr demo</title>"
            f"<style>{STYLE}</style><script>{PAGE_SCRIPT}</script></head><body>\n" +
            "\n".join(body) + "\n</body></html>\n")


def main(argv):
    args = argv[1:]
    html_out = None
    if "--html" in args:
        i = args.index("--html")
        if i + 1 >= len(args):
            print("report.py: --html needs a file", file=sys.stderr)
            return 2
        html_out = args[i + 1]
        del args[i:i + 2]
    if len(args) != 1 or args[0].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    results = args[0]
    sections = load_sections(results)
    if not sections:
        print(f"report.py: no bench results under {results}/<section>/", file=sys.stderr)
        return 1
    print(text_report(sections))
    if html_out:
        meta = ""
        meta_path = os.path.join(results, "meta.txt")
        if os.path.exists(meta_path):
            with open(meta_path) as fh:
                meta = fh.read().strip()
        with open(html_out, "w") as fh:
            fh.write(html_report(results, sections, meta))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
