#!/usr/bin/env python3
"""Draws the breakerd Grafana dashboard from a real Prometheus into one PNG.

There is no Grafana here, so this does what Grafana would for one page: it
reads breakerd.json, resolves its template variables against Prometheus
(label_values(...) and query_result(...) queries, custom variables, the
defaults saved in the dashboard, --var overrides), expands the repeated rows
and panels, substitutes $__interval, $__rate_interval and $__range the way
Grafana computes them, runs every panel query (query_range for graphs,
instant queries where the panel asks for one) and draws each panel as a
small chart on one page: titles, units, stacking, bars, the colour
overrides, stats, bar gauges and tables.

    python3 deploy/grafana/render.py --prometheus http://127.0.0.1:9090 \\
        --start now-1h --end now --out breakerd.png

It exits 0 when every panel had data, 1 (naming each panel) when one or
more had none (the PNG is still written, to look at), 2 on a usage error,
a query Prometheus rejected or a Prometheus it cannot reach.

matplotlib comes from PyPI, pinned in requirements.txt beside this file. If
it cannot be imported, --venv DIR (default: $BREAKERD_RENDER_VENV, else
~/.cache/breakerd/grafana-render-venv) is created with those pins and the
script runs again inside it; --no-venv fails instead.
"""

import argparse
import datetime
import fcntl
import hashlib
import json
import math
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REQUIREMENTS = os.path.join(HERE, "requirements.txt")
IN_VENV_MARK = "BREAKERD_RENDER_IN_VENV"


# --- matplotlib, from a venv if need be --------------------------------------

def ensure_matplotlib(venv, allow_venv):
    """Imports matplotlib, or re-runs this script in `venv` with the pins."""
    try:
        import matplotlib  # noqa: F401
        return
    except ImportError:
        if not allow_venv or os.environ.get(IN_VENV_MARK):
            sys.exit("render.py: matplotlib is not installed (pip install -r "
                     f"{REQUIREMENTS})")
    with open(REQUIREMENTS, "rb") as f:
        stamp = hashlib.sha256(f.read()).hexdigest()
    python = os.path.join(venv, "bin", "python")
    os.makedirs(os.path.dirname(os.path.abspath(venv)), exist_ok=True)
    # One creator at a time (two tests may start together).
    with open(os.path.abspath(venv) + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        stamp_path = os.path.join(venv, ".requirements-stamp")
        current = ""
        if os.path.exists(stamp_path):
            with open(stamp_path) as f:
                current = f.read().strip()
        if current != stamp or not os.access(python, os.X_OK):
            print(f"render.py: installing {REQUIREMENTS} into {venv}",
                  file=sys.stderr, flush=True)
            if not os.access(python, os.X_OK):
                subprocess.run([sys.executable, "-m", "venv", venv],
                               check=True)
            subprocess.run([python, "-m", "pip", "install", "-q",
                            "--disable-pip-version-check", "-r",
                            REQUIREMENTS], check=True)
            with open(stamp_path, "w") as f:
                f.write(stamp + "\n")
    env = dict(os.environ, **{IN_VENV_MARK: "1"})
    os.execve(python, [python, os.path.abspath(__file__)] + sys.argv[1:], env)


# --- time and intervals ------------------------------------------------------

_RELATIVE = re.compile(r"^now(?:-(\d+(?:\.\d+)?)(ms|s|m|h|d))?$")
_UNIT_S = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_time(text, now):
    """Unix seconds, RFC 3339, "now" or "now-<n><ms|s|m|h|d>"."""
    m = _RELATIVE.match(text)
    if m:
        return now - (float(m.group(1)) * _UNIT_S[m.group(2)]
                      if m.group(1) else 0)
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return datetime.datetime.fromisoformat(
            text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a time: {text}")


def parse_duration(text):
    m = re.match(r"^(\d+(?:\.\d+)?)(ms|s|m|h|d)$", text)
    if not m:
        raise argparse.ArgumentTypeError(f"not a duration: {text}")
    return float(m.group(1)) * _UNIT_S[m.group(2)]


# Grafana's kbn.roundInterval: (upper bound ms, rounded ms).
_ROUND = [(15, 10), (35, 20), (75, 50), (150, 100), (350, 200), (750, 500),
          (1500, 1000), (3500, 2000), (7500, 5000), (12500, 10000),
          (17500, 15000), (25000, 20000), (45000, 30000), (90000, 60000),
          (210000, 120000), (450000, 300000), (750000, 600000),
          (1050000, 900000), (1500000, 1200000), (2700000, 1800000),
          (5400000, 3600000), (9000000, 7200000), (16200000, 10800000),
          (32400000, 21600000), (86400000, 43200000),
          (604800000, 86400000), (1814400000, 604800000),
          (3628800000, 2592000000)]


def round_interval(ms):
    for bound, rounded in _ROUND:
        if ms <= bound:
            return rounded
    return 31536000000


def promql_duration(seconds):
    ms = int(round(seconds * 1000))
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


class Intervals:
    """$__interval (the query step), $__rate_interval and $__range, as
    Grafana computes them for one panel."""

    def __init__(self, start, end, scrape, max_points, min_interval=None):
        self.start, self.end = start, end
        raw_ms = (end - start) * 1000 / max_points
        low_ms = (min_interval or scrape) * 1000
        self.step = max(round_interval(raw_ms), low_ms) / 1000
        self.rate = max(self.step + scrape, 4 * scrape)
        self.range = end - start

    def builtins(self):
        return {
            "__interval": promql_duration(self.step),
            "__interval_ms": str(int(self.step * 1000)),
            "__rate_interval": promql_duration(self.rate),
            "__range": promql_duration(round(self.range)),
            "__range_s": str(int(round(self.range))),
            "__range_ms": str(int(round(self.range * 1000))),
        }


# --- Prometheus --------------------------------------------------------------

class QueryError(Exception):
    pass


class Prometheus:
    def __init__(self, url, timeout=30):
        self.url = url.rstrip("/")
        self.timeout = timeout

    def _get(self, path, params):
        url = f"{self.url}{path}?{urllib.parse.urlencode(params, doseq=True)}"
        try:
            with urllib.request.urlopen(url, timeout=self.timeout) as r:
                body = json.load(r)
        except urllib.error.HTTPError as e:
            try:
                body = json.load(e)
            except ValueError:
                raise QueryError(f"HTTP {e.code} from {url}")
        except (urllib.error.URLError, OSError, ValueError) as e:
            raise QueryError(f"cannot query {self.url}: {e}")
        if body.get("status") != "success":
            raise QueryError(body.get("error", "no answer"))
        return body["data"]

    def instant(self, expr, at):
        return self._get("/api/v1/query", {"query": expr, "time": at})

    def range(self, expr, start, end, step):
        return self._get("/api/v1/query_range",
                         {"query": expr, "start": start, "end": end,
                          "step": step})

    def series(self, match, start, end):
        return self._get("/api/v1/series",
                         {"match[]": match, "start": start, "end": end})

    def label_values(self, label, start, end):
        return self._get(f"/api/v1/label/{urllib.parse.quote(label)}/values",
                         {"start": start, "end": end})


# --- template variables ------------------------------------------------------

_VAR = re.compile(r"\$\{(\w+)(?::[\w]+)?\}|\$(\w+)|\[\[(\w+)\]\]")
_REGEX_SPECIAL = re.compile(r"[\\^$*+?.()|\[\]{}]")


class Variable:
    def __init__(self, spec):
        self.spec = spec
        self.name = spec["name"]
        self.type = spec.get("type")
        self.multi = bool(spec.get("multi"))
        self.include_all = bool(spec.get("includeAll"))
        self.all_value = spec.get("allValue")
        self.options = []   # every value offered
        self.selected = []  # the values in force (All expanded)
        self.is_all = False

    def format(self, values):
        """The text that replaces $name when it stands for `values`."""
        if self.is_all and self.all_value and values == self.selected:
            return self.all_value
        if self.multi or self.include_all:
            escaped = [_REGEX_SPECIAL.sub(lambda m: "\\\\" + m.group(0), v)
                       for v in values]
            return escaped[0] if len(escaped) == 1 else (
                "(" + "|".join(escaped) + ")")
        return values[0] if values else ""


def substitute(text, variables, builtins, fixed=None):
    """Replaces $var, ${var}, ${var:fmt} and [[var]]; unknown names stay."""
    fixed = fixed or {}

    def repl(m):
        name = m.group(1) or m.group(2) or m.group(3)
        if name in builtins:
            return builtins[name]
        if name in fixed:
            return variables[name].format([fixed[name]])
        if name in variables:
            v = variables[name]
            return v.format(v.selected)
        return m.group(0)

    return _VAR.sub(repl, text)


def _regex_filter(values, regex):
    if not regex:
        return values
    m = re.match(r"^/(.*)/([a-z]*)$", regex, re.S)
    pattern, flags = (m.group(1), m.group(2)) if m else (regex, "")
    rx = re.compile(pattern, re.I if "i" in flags else 0)
    out = []
    for v in values:
        found = rx.search(v)
        if not found:
            continue
        groups = found.groupdict()
        text = (groups.get("value") or groups.get("text")
                or (found.group(1) if found.groups() else v))
        out.append(text)
    return out


def _format_series(metric):
    name = metric.get("__name__", "")
    labels = ", ".join(f'{k}="{v}"' for k, v in sorted(metric.items())
                       if k != "__name__")
    return f"{name}{{{labels}}}"


def resolve_variables(dashboard, prom, overrides, start, end, builtins):
    variables = {}
    for spec in dashboard.get("templating", {}).get("list", []):
        var = Variable(spec)
        variables[var.name] = var
        if var.type == "datasource":
            continue
        if var.type == "custom":
            var.options = [o.strip() for o in
                           str(spec.get("query", "")).split(",") if o.strip()]
        elif var.type == "constant" or var.type == "textbox":
            var.options = [str(spec.get("query", ""))]
        elif var.type == "query":
            query = spec.get("definition") or spec.get("query")
            if isinstance(query, dict):
                query = query.get("query", "")
            query = substitute(query, variables, builtins)
            var.options = _regex_filter(
                _run_variable_query(prom, query, start, end),
                spec.get("regex", ""))
            sort = spec.get("sort", 0)
            if sort in (1, 2):
                var.options.sort(reverse=sort == 2)
            elif sort in (3, 4):
                var.options.sort(key=_numeric_key, reverse=sort == 4)
        else:
            raise QueryError(f"variable {var.name}: type {var.type} is not "
                             "supported")
        var.options = list(dict.fromkeys(var.options))
        _select(var, overrides.get(var.name))
    return variables


def _numeric_key(v):
    try:
        return float(v)
    except ValueError:
        return math.inf


def _run_variable_query(prom, query, start, end):
    query = query.strip()
    m = re.match(r"^label_values\((.*)\)$", query, re.S)
    if m:
        args = m.group(1)
        selector, _, label = args.rpartition(",")
        label = label.strip()
        if not selector.strip():
            return prom.label_values(label, start, end)
        values = []
        for s in prom.series(selector.strip(), start, end):
            if label in s:
                values.append(s[label])
        return sorted(set(values))
    m = re.match(r"^query_result\((.*)\)$", query, re.S)
    if m:
        data = prom.instant(m.group(1), end)
        out = []
        for r in data.get("result", []):
            value = r.get("value", [end, ""])
            out.append(f"{_format_series(r['metric'])} {value[1]} "
                       f"{int(float(value[0]) * 1000)}")
        return out
    raise QueryError(f"variable query not supported: {query}")


def _select(var, override):
    current = var.spec.get("current") or {}
    saved = current.get("value", [])
    saved = saved if isinstance(saved, list) else [saved]
    if override is not None:
        wanted = [v for v in override.split(",") if v != ""]
        if wanted == ["$__all"] or wanted == ["All"]:
            var.is_all, var.selected = True, list(var.options)
        else:
            var.selected = wanted
        return
    if "$__all" in saved and var.include_all:
        var.is_all, var.selected = True, list(var.options)
        return
    kept = [v for v in saved if v in var.options]
    if kept:
        var.selected = kept if var.multi else kept[:1]
    elif var.options:
        var.selected = var.options[:1]  # what Grafana falls back to
    else:
        var.selected = []


# --- panels ------------------------------------------------------------------

class Instance:
    """One drawn panel: a dashboard panel with its repeat variable fixed."""

    def __init__(self, panel, fixed, variables):
        self.panel = panel
        self.fixed = fixed
        self.title = substitute(panel.get("title", ""), variables, {}, fixed)
        self.series = []     # [(legend, [times], [values], refId)]
        self.rows = []       # a table's rows, in self.columns' order
        self.columns = []    # a table's (column, shown name)
        self.error = None
        self.step = None     # the query step of its range queries
        self.start = None    # the first step

    @property
    def type(self):
        return self.panel.get("type")

    def has_data(self):
        if self.type == "table":
            return bool(self.rows)
        return any(any(_finite(v) for v in values)
                   for _, _, values, _ in self.series)


def _finite(v):
    return v is not None and not math.isnan(v) and not math.isinf(v)


def expand(dashboard, variables):
    """[(section title, [(panel, fixed vars)])] in dashboard order, with
    repeated rows and panels expanded over their variable's values."""
    sections = []
    top = sorted(dashboard.get("panels", []),
                 key=lambda p: (p["gridPos"]["y"], p["gridPos"]["x"]))
    current = None
    for p in top:
        if p.get("type") == "row":
            current = {"row": p, "panels": list(p.get("panels", []))}
            sections.append(current)
        else:
            if current is None:
                current = {"row": None, "panels": []}
                sections.append(current)
            current["panels"].append(p)
    out = []
    for s in sections:
        row = s["row"]
        row_values = [{}]
        if row is not None and row.get("repeat"):
            name = row["repeat"]
            row_values = [{name: v} for v in variables[name].selected]
        for fixed in row_values:
            title = ""
            if row is not None:
                title = substitute(row.get("title", ""), variables, {}, fixed)
            items = []
            for p in s["panels"]:
                name = p.get("repeat")
                if name and name not in fixed:
                    for v in variables[name].selected:
                        items.append((p, dict(fixed, **{name: v})))
                else:
                    items.append((p, fixed))
            out.append((title, items))
    return out


def legend_text(fmt, metric):
    if fmt:
        text = re.sub(r"\{\{\s*(\w+)\s*\}\}",
                      lambda m: metric.get(m.group(1), ""), fmt)
        # Grafana shows the series' labels when the legend comes out empty
        # (e.g. {{pod}} on a scrape without a pod label): the instance here.
        return " ".join(text.split()) or metric.get("instance", "value")
    labels = {k: v for k, v in metric.items() if k != "__name__"}
    return _format_series(dict(labels, __name__=metric.get("__name__", "")))


def run_panel(inst, prom, variables, args):
    p = inst.panel
    min_interval = (parse_duration(p["interval"]) if p.get("interval")
                    else None)
    iv = Intervals(args.start, args.end, args.scrape_interval,
                   args.max_points, min_interval)
    builtins = iv.builtins()
    table_frames = []
    for t in p.get("targets", []):
        if t.get("hide") or not t.get("expr"):
            continue
        expr = substitute(t["expr"], variables, builtins, inst.fixed)
        ref = t.get("refId", "A")
        instant = bool(t.get("instant")) and not t.get("range", False)
        try:
            if instant:
                data = prom.instant(expr, args.end)
                for r in data.get("result", []):
                    v = float(r["value"][1])
                    if t.get("format") == "table":
                        table_frames.append((ref, r["metric"], v))
                    else:
                        inst.series.append(
                            (legend_text(t.get("legendFormat"), r["metric"]),
                             [float(r["value"][0])], [v], ref))
            else:
                start = math.floor(args.start / iv.step) * iv.step
                data = prom.range(expr, start, args.end, iv.step)
                for r in data.get("result", []):
                    ts = [float(x[0]) for x in r["values"]]
                    vs = [float(x[1]) for x in r["values"]]
                    inst.series.append(
                        (legend_text(t.get("legendFormat"), r["metric"]),
                         ts, vs, ref))
        except QueryError as e:
            inst.error = f"{ref}: {e}\n  {expr}"
            return
        inst.step = iv.step
        inst.start = math.floor(args.start / iv.step) * iv.step
    if p.get("type") == "table":
        _build_table(inst, table_frames)


def _build_table(inst, frames):
    """Grafana's "merge" then "organize" transformations, for our tables."""
    rows = {}
    keys = []
    for ref, metric, value in frames:
        labels = tuple(sorted((k, v) for k, v in metric.items()
                              if k != "__name__"))
        if labels not in rows:
            rows[labels] = {}
            keys.append(labels)
        rows[labels][f"Value #{ref}"] = value
    organize = {}
    for tr in inst.panel.get("transformations", []):
        if tr.get("id") == "organize":
            organize = tr.get("options", {})
    rename = organize.get("renameByName", {})
    exclude = {k for k, v in organize.get("excludeByName", {}).items() if v}
    index = organize.get("indexByName", {})
    columns = []
    for labels in keys:
        for k, _ in labels:
            if k not in columns:
                columns.append(k)
    for labels in keys:
        for k in rows[labels]:
            if k not in columns:
                columns.append(k)
    columns = [c for c in columns if c not in exclude]
    position = {c: index.get(c, 1000 + i) for i, c in enumerate(columns)}
    columns.sort(key=position.get)
    inst.columns = [(c, rename.get(c, c)) for c in columns]
    for labels in keys:
        d = dict(labels)
        d.update(rows[labels])
        inst.rows.append([d.get(c) for c in columns])


# --- drawing -----------------------------------------------------------------

GRAFANA_COLOURS = {
    "green": "#56A64B", "dark-green": "#37872D", "yellow": "#F2CC0C",
    "dark-yellow": "#E0B400", "red": "#E02F44", "dark-red": "#AD0317",
    "orange": "#FF780A", "dark-orange": "#FA6400", "purple": "#A352CC",
    "dark-purple": "#8F3BB8", "blue": "#3274D9", "dark-blue": "#1F60C4",
    "text": "#333333", "transparent": "#FFFFFF00",
}
PALETTE = ["#7EB26D", "#EAB839", "#6ED0E0", "#EF843C", "#E24D42", "#1F78C1",
           "#BA43A9", "#705DA0", "#508642", "#CCA300", "#447EBC", "#C15C17",
           "#890F02", "#0A437C", "#6D1F62", "#584477"]


def colour(name):
    return GRAFANA_COLOURS.get(name, name)


def fmt_value(v, unit, decimals=None):
    if v is None or not _finite(v):
        return "-"
    d = decimals
    if unit == "percentunit":
        return f"{v * 100:.{0 if d is None and abs(v) >= 0.1 else (d or 1)}f}%"
    if unit == "percent":
        return f"{v:.{1 if d is None else d}f}%"
    if unit in ("s", "dtdurations"):
        a = abs(v)
        if a == 0:
            return "0 s"
        if a < 1e-3:
            return f"{v * 1e6:.0f} µs"
        if a < 1:
            return f"{v * 1e3:.{1 if a < 0.01 else 0}f} ms"
        if a < 120:
            return f"{v:.{1 if a < 10 else 0}f} s"
        if a < 7200:
            return f"{v / 60:.1f} min"
        return f"{v / 3600:.1f} h"
    suffix = {"reqps": " req/s", "ops": " ops/s"}.get(unit, "")
    a = abs(v)
    for div, s in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if a >= div:
            return f"{v / div:.1f}{s}{suffix}"
    if d is not None:
        return f"{v:.{d}f}{suffix}"
    if a == 0 or a >= 100 or float(v).is_integer():
        return f"{v:.0f}{suffix}"
    return f"{v:.2f}{suffix}" if a < 10 else f"{v:.1f}{suffix}"


def overrides_for(panel, name):
    """The override properties (id -> value) that apply to series `name`."""
    props = {}
    for o in panel.get("fieldConfig", {}).get("overrides", []):
        m = o.get("matcher", {})
        hit = (m.get("id") == "byName" and m.get("options") == name) or (
            m.get("id") == "byRegexp" and re.search(m.get("options", "$^"),
                                                    name))
        if hit:
            for prop in o.get("properties", []):
                props[prop["id"]] = prop.get("value")
    return props


def threshold_colour(steps, v):
    chosen = steps[0]["color"] if steps else "green"
    for s in steps:
        if s.get("value") is None or (_finite(v) and v >= s["value"]):
            chosen = s["color"]
    return colour(chosen)


def draw(sections, args, variables, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    width_in = 22.0
    unit_h = 0.34          # inches per Grafana grid row
    header_h = 0.38
    margin = 0.25
    # Lay out: each section a header line, then its panels flowed into
    # lines of 24 grid columns.
    lines = []   # (kind, payload, height)
    for title, items in sections:
        if not items:
            continue
        lines.append(("header", title, header_h))
        line, used = [], 0
        for inst in items:
            w = inst.panel["gridPos"]["w"]
            if used + w > 24 and line:
                lines.append(("panels", line, max(
                    i.panel["gridPos"]["h"] for i in line) * unit_h))
                line, used = [], 0
            line.append(inst)
            used += w
        if line:
            lines.append(("panels", line,
                          max(i.panel["gridPos"]["h"] for i in line) * unit_h))
    top_h = 0.9
    height_in = top_h + sum(h for _, _, h in lines) + margin
    fig = plt.figure(figsize=(width_in, height_in), dpi=args.dpi)
    fig.patch.set_facecolor("white")
    fmt_t = lambda t: datetime.datetime.fromtimestamp(  # noqa: E731
        t, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    var_text = ", ".join(
        f"{n}={'All' if v.is_all else ','.join(v.selected) or '-'}"
        for n, v in variables.items() if v.type != "datasource")
    fig.text(margin / width_in, 1 - 0.3 / height_in,
             f"{args.dashboard_title}   {fmt_t(args.start)} to "
             f"{fmt_t(args.end)} UTC", fontsize=15, weight="bold",
             va="top")
    fig.text(margin / width_in, 1 - 0.62 / height_in,
             f"{args.prometheus}   {var_text}", fontsize=9, va="top",
             color="#555555")
    y = height_in - top_h
    usable = width_in - 2 * margin
    for kind, payload, h in lines:
        y -= h
        if kind == "header":
            fig.text(margin / width_in, (y + 0.1) / height_in, payload,
                     fontsize=12, weight="bold", color="#1F60C4")
            fig.add_artist(plt.Line2D(
                [margin / width_in, 1 - margin / width_in],
                [(y + 0.05) / height_in] * 2, color="#1F60C4", lw=0.8))
            continue
        x = margin
        for inst in payload:
            w_in = usable * inst.panel["gridPos"]["w"] / 24
            ph = inst.panel["gridPos"]["h"] * unit_h
            box = (x, y + h - ph, w_in, ph)
            draw_panel(fig, inst, box, width_in, height_in, mdates, plt,
                       FuncFormatter, MaxNLocator)
            x += w_in
    fig.savefig(out, dpi=args.dpi, facecolor="white")
    plt.close(fig)


def draw_panel(fig, inst, box, fw, fh, mdates, plt, FuncFormatter,
               MaxNLocator):
    x, y, w, h = box
    p = inst.panel
    defaults = p.get("fieldConfig", {}).get("defaults", {})
    unit = defaults.get("unit", "short")
    decimals = defaults.get("decimals")
    pad = 0.12
    title_h = 0.28
    kind = inst.type
    small = kind == "stat"
    legend_h = 0 if kind in ("stat", "table", "bargauge") else 0.62
    axis_left = 0.62 if kind in ("timeseries",) else pad
    ax_box = [(x + axis_left) / fw, (y + pad + legend_h) / fh,
              (w - axis_left - pad) / fw,
              (h - title_h - pad - legend_h - (0.05 if small else 0)) / fh]
    # Panel frame and title.
    fig.add_artist(plt.Rectangle((x / fw + 0.02 / fw, y / fh + 0.02 / fh),
                                 (w - 0.04) / fw, (h - 0.04) / fh,
                                 transform=fig.transFigure, fill=False,
                                 ec="#D0D0D0", lw=0.8))
    unit_note = "" if unit in ("none", "short", "") or kind == "table" else (
        f"  [{unit}]")
    fig.text((x + pad) / fw, (y + h - 0.08) / fh, inst.title + unit_note,
             fontsize=8.5, weight="bold", va="top", clip_on=True)
    ax = fig.add_axes(ax_box)
    if inst.error:
        ax.axis("off")
        ax.text(0.5, 0.5, "query error", color="red", ha="center",
                va="center", fontsize=9, transform=ax.transAxes)
        return
    if not inst.has_data():
        ax.axis("off")
        ax.text(0.5, 0.5, "No data", color="#999999", ha="center",
                va="center", fontsize=10, transform=ax.transAxes)
        return
    if kind == "stat":
        draw_stat(ax, inst, defaults, unit, decimals)
    elif kind == "bargauge":
        draw_bargauge(ax, inst, defaults, unit, decimals, FuncFormatter,
                      MaxNLocator)
    elif kind == "table":
        draw_table(ax, inst)
    else:
        draw_timeseries(ax, inst, defaults, unit, decimals, mdates,
                        FuncFormatter, MaxNLocator)


def draw_stat(ax, inst, defaults, unit, decimals):
    ax.axis("off")
    value = sum(v[-1] for _, _, v, _ in inst.series if _finite(v[-1]))
    steps = defaults.get("thresholds", {}).get("steps", [])
    c = threshold_colour(steps, value)
    from matplotlib.patches import FancyBboxPatch
    ax.add_patch(FancyBboxPatch(
        (0, 0), 1, 1, boxstyle="round,pad=0,rounding_size=0.04",
        transform=ax.transAxes, fc=c, ec="none"))
    ax.text(0.5, 0.5, fmt_value(value, unit, decimals), ha="center",
            va="center", fontsize=20, weight="bold", color="white",
            transform=ax.transAxes)


def draw_bargauge(ax, inst, defaults, unit, decimals, FuncFormatter,
                  MaxNLocator):
    steps = defaults.get("thresholds", {}).get("steps", [])
    items = [(name, v[-1]) for name, _, v, _ in inst.series if _finite(v[-1])]
    items.sort(key=lambda kv: kv[0])
    names = [n or "value" for n, _ in items][::-1]
    values = [v for _, v in items][::-1]
    ax.barh(range(len(values)), values,
            color=[threshold_colour(steps, v) for v in values], height=0.6)
    ax.set_yticks(range(len(values)))
    ax.set_yticklabels(names, fontsize=7)
    for i, v in enumerate(values):
        ax.text(v, i, " " + fmt_value(v, unit, decimals), va="center",
                fontsize=7)
    ax.xaxis.set_major_locator(MaxNLocator(5, integer=decimals == 0))
    ax.xaxis.set_major_formatter(FuncFormatter(
        lambda v, _: fmt_value(v, unit, decimals)))
    ax.tick_params(axis="x", labelsize=6.5)
    ax.set_xlim(0, max(values + [1e-9]) * 1.35)
    ax.grid(axis="x", color="#EEEEEE")
    ax.set_axisbelow(True)
    for s in ("top", "right"):
        ax.spines[s].set_visible(False)


def draw_table(ax, inst):
    ax.axis("off")
    cols = inst.panel.get("fieldConfig", {}).get("overrides", [])
    units = {}
    for o in cols:
        if o.get("matcher", {}).get("id") == "byName":
            for prop in o.get("properties", []):
                if prop["id"] == "unit":
                    units[o["matcher"]["options"]] = prop["value"]
    header = [shown for _, shown in inst.columns]
    cells = []
    for r in inst.rows[:12]:
        line = []
        for (_, shown), v in zip(inst.columns, r):
            if isinstance(v, float):
                line.append(fmt_value(v, units.get(shown, "none"), 0))
            else:
                line.append("" if v is None else str(v))
        cells.append(line)
    lengths = [max([len(hd)] + [len(line[i]) for line in cells]) + 4
               for i, hd in enumerate(header)]
    height = min(1.0, 0.13 * (len(cells) + 1))
    table = ax.table(cellText=cells, colLabels=header, cellLoc="left",
                     colLoc="left", bbox=[0, 1 - height, 1, height],
                     colWidths=[n / sum(lengths) for n in lengths])
    table.auto_set_font_size(False)
    table.set_fontsize(8)
    state_col = header.index("state") if "state" in header else -1
    state_colour = {"half-open": "yellow", "open": "red",
                    "forced open": "purple", "forced closed": "blue"}
    for (row, col), cell in table.get_celld().items():
        cell.set_edgecolor("#DDDDDD")
        if row == 0:
            cell.set_text_props(weight="bold")
            cell.set_facecolor("#F4F5F5")
        elif col == state_col:
            c = state_colour.get(cells[row - 1][col])
            if c:
                cell.set_facecolor(colour(c))
                cell.get_text().set_color("white")


def draw_timeseries(ax, inst, defaults, unit, decimals, mdates,
                    FuncFormatter, MaxNLocator):
    import numpy as np
    p = inst.panel
    custom = defaults.get("custom", {})
    draw_style = custom.get("drawStyle", "line")
    stack_mode = custom.get("stacking", {}).get("mode", "none")
    step = inst.step or 15
    # A common time grid for stacking: the union of the steps.
    grid = sorted({t for _, ts, _, _ in inst.series for t in ts})
    index = {t: i for i, t in enumerate(grid)}
    to_dates = lambda ts: mdates.date2num([  # noqa: E731
        datetime.datetime.fromtimestamp(t, datetime.timezone.utc)
        for t in ts])
    gx = to_dates(grid)
    stacked_bottom = np.zeros(len(grid))
    palette_i = 0
    series = sorted(inst.series, key=lambda s: (s[3], _natural(s[0])))
    nbars = sum(1 for _ in series) if draw_style == "bars" else 1
    bar_w = step / 86400 * 0.85
    for n, (name, ts, vs, _) in enumerate(series):
        props = overrides_for(p, name)
        c = props.get("color", {}).get("fixedColor") if isinstance(
            props.get("color"), dict) else None
        if c is None:
            c = PALETTE[palette_i % len(PALETTE)]
            palette_i += 1
        c = colour(c)
        style = props.get("custom.drawStyle", draw_style)
        stack = props.get("custom.stacking", {}).get("mode", stack_mode) \
            if isinstance(props.get("custom.stacking"), dict) else stack_mode
        lw = props.get("custom.lineWidth", custom.get("lineWidth", 1)) or 1
        dashed = isinstance(props.get("custom.lineStyle"), dict) and \
            props["custom.lineStyle"].get("fill") == "dash"
        fill = props.get("custom.fillOpacity", custom.get("fillOpacity", 0))
        full = np.full(len(grid), np.nan)
        for t, v in zip(ts, vs):
            full[index[t]] = v
        if stack != "none":
            vals = np.nan_to_num(full, nan=0.0)
            if style == "bars":
                ax.bar(gx, vals, width=bar_w, bottom=stacked_bottom, color=c,
                       label=name, align="center", linewidth=0)
            else:
                ax.fill_between(gx, stacked_bottom, stacked_bottom + vals,
                                color=c, alpha=max(fill, 40) / 100,
                                label=name, linewidth=0, step=None)
                ax.plot(gx, stacked_bottom + vals, color=c, lw=lw)
            stacked_bottom = stacked_bottom + vals
        elif style == "bars":
            width = bar_w / nbars
            offset = (n - (nbars - 1) / 2) * width
            vals = np.nan_to_num(full, nan=0.0)
            ax.bar(gx + offset, vals, width=width, color=c, label=name,
                   align="center", linewidth=0)
        else:
            ax.plot(gx, full, color=c, lw=max(lw, 1) * 0.9,
                    ls="--" if dashed else "-", label=name)
            if fill and not dashed:
                ax.fill_between(gx, 0, np.nan_to_num(full, nan=0.0),
                                where=~np.isnan(full), color=c,
                                alpha=fill / 300, linewidth=0)
    lo = defaults.get("min")
    hi = defaults.get("max")
    if lo is not None or custom.get("axisSoftMin") is not None:
        ax.set_ylim(bottom=lo if lo is not None else 0)
    if hi is not None:
        ax.set_ylim(top=hi * (1.02 if stack_mode == "none" else 1.0))
    if inst.start is not None and len(gx):
        ax.set_xlim(to_dates([inst.start])[0], gx[-1])
    ax.xaxis.set_major_formatter(mdates.DateFormatter(
        "%H:%M:%S", tz=datetime.timezone.utc))
    ax.xaxis.set_major_locator(MaxNLocator(5))
    ax.yaxis.set_major_locator(MaxNLocator(4, integer=decimals == 0))
    ax.yaxis.set_major_formatter(FuncFormatter(
        lambda v, _: fmt_value(v, unit, decimals)))
    ax.tick_params(labelsize=6.5)
    ax.grid(color="#EEEEEE")
    ax.set_axisbelow(True)
    for s in ("top", "right"):
        ax.spines[s].set_visible(False)
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        shown = 8
        extra = len(handles) - shown
        handles, labels = handles[:shown], labels[:shown]
        if extra > 0:
            labels[-1] += f"  (+{extra} more)"
        ax.legend(handles, labels, loc="upper left",
                  bbox_to_anchor=(-0.02, -0.14), ncol=3 if len(labels) > 2
                  else len(labels), fontsize=6.3, frameon=False,
                  handlelength=1.2, columnspacing=1.0, borderaxespad=0)


def _natural(text):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text)]


# --- main --------------------------------------------------------------------

def main():
    now = time.time()
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prometheus", required=True,
                    help="Prometheus base URL, e.g. http://127.0.0.1:9090")
    ap.add_argument("--dashboard", default=os.path.join(HERE, "breakerd.json"))
    ap.add_argument("--start", default="now-1h",
                    help="unix seconds, RFC 3339 or now-<n>(s|m|h|d)")
    ap.add_argument("--end", default="now")
    ap.add_argument("--out", required=True, help="the PNG to write")
    ap.add_argument("--var", action="append", default=[],
                    metavar="NAME=VALUE[,VALUE...]",
                    help="select template variable values (All: $__all)")
    ap.add_argument("--scrape-interval", default="15s",
                    help="the data source's scrape interval, as Grafana's "
                         "data source setting (default 15s): the smallest "
                         "$__interval and the base of $__rate_interval")
    ap.add_argument("--max-points", type=int, default=300,
                    help="points per graph (Grafana: the panel's width in "
                         "pixels); $__interval = range / this, rounded")
    ap.add_argument("--dpi", type=int, default=80)
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser(
        "~/.cache")
    ap.add_argument("--venv", default=os.environ.get(
        "BREAKERD_RENDER_VENV",
        os.path.join(cache, "breakerd", "grafana-render-venv")),
        help="where to install matplotlib if it cannot be imported "
             "(default: $BREAKERD_RENDER_VENV, else "
             "~/.cache/breakerd/grafana-render-venv)")
    ap.add_argument("--no-venv", action="store_true")
    args = ap.parse_args()
    try:
        args.start = parse_time(args.start, now)
        args.end = parse_time(args.end, now)
        args.scrape_interval = parse_duration(args.scrape_interval)
    except argparse.ArgumentTypeError as e:
        ap.error(str(e))
    if args.end <= args.start:
        ap.error("--end must be after --start")
    overrides = {}
    for v in args.var:
        name, sep, value = v.partition("=")
        if not sep:
            ap.error(f"--var {v}: expected NAME=VALUE")
        overrides[name] = value

    ensure_matplotlib(args.venv, not args.no_venv)

    with open(args.dashboard, encoding="utf-8") as f:
        dashboard = json.load(f)
    args.dashboard_title = dashboard.get("title", "dashboard")
    prom = Prometheus(args.prometheus)
    base = Intervals(args.start, args.end, args.scrape_interval,
                     args.max_points)
    try:
        variables = resolve_variables(dashboard, prom, overrides, args.start,
                                      args.end, base.builtins())
    except QueryError as e:
        print(f"render.py: {e}", file=sys.stderr)
        return 2
    sections = []
    instances = []
    for title, items in expand(dashboard, variables):
        insts = [Instance(p, fixed, variables) for p, fixed in items]
        sections.append((title, insts))
        instances += insts
    for inst in instances:
        run_panel(inst, prom, variables, args)
    draw(sections, args, variables, args.out)

    errors = [i for i in instances if i.error]
    empty = [i for i in instances if not i.error and not i.has_data()]
    for i in instances:
        state = ("QUERY ERROR" if i.error else
                 "ok" if i.has_data() else "NO DATA")
        n = len(i.rows) if i.type == "table" else len(i.series)
        print(f"{state:<11} {i.title}  ({i.type}, {n} "
              f"{'rows' if i.type == 'table' else 'series'})")
    for i in errors:
        print(f"render.py: panel \"{i.title}\": query error {i.error}",
              file=sys.stderr)
    for i in empty:
        print(f"render.py: panel \"{i.title}\" has no data", file=sys.stderr)
    print(f"render.py: {len(instances)} panels drawn into {args.out}; "
          + (f"{len(errors)} with query errors, " if errors else "")
          + (f"{len(empty)} without data" if empty else
             "every panel has data"))
    if errors:
        return 2
    return 1 if empty else 0


if __name__ == "__main__":
    sys.exit(main())
