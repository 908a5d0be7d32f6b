#!/usr/bin/env python3
"""Draws the chart's Grafana dashboard (files/dashboard.json) as a PNG, from real data.

Grafana itself is not needed: every panel's PromQL `expr` is run against a Prometheus through
/api/v1/query_range over the last N minutes, and drawn with matplotlib as one subplot per panel,
placed by its gridPos (24 columns), with its title, its unit and a legend made from its
legendFormat. The `$plugin` variable is "All" (its allValue, `.*`) unless --plugin says otherwise.
For the docs (docs/img/dashboard.png), not for CI.

The picture in docs/img/dashboard.png came from real data, made by the driver beside this file,
which runs a test environment, one host, a Prometheus scraping it and a workload of DnsZones:

    bash deploy/helm/orchard/tools/dashboard-demo.sh        # about 15 minutes; see its header

It renders from Prometheus's start to three minutes after the workload ended, so that the last
minutes show what settles and what stays (the committed picture: 17:47–18:04 UTC of one run).

That is, by hand, from the repo root (all on 127.0.0.1):

    bash tests/env/build-tools.sh                            # helm … promtool (cached)
    bash deploy/helm/orchard/tools/dashboard-demo.sh build   # prometheus (cmd/prometheus, same
                                                             # module and version as promtool),
                                                             # `make plugins`, `cargo build -p orchard`
    ORCHARD_TESTENV_DIR=/tmp/dash-env bash tests/env/testenv.sh up --without-rabbitmq
    set -a; . /tmp/dash-env/env; set +a
    orchard run --plugin pdns_zone.wasm --plugin pdns_record.wasm --allow-host "$PDNS_API_URL" \\
        --install-crds --namespace orchard-dashboard --admin-addr 127.0.0.1:$ADMIN &
    prometheus --config.file prometheus.yml (scrape_interval 5s, target 127.0.0.1:$ADMIN) \\
        --storage.tsdb.path "$(mktemp -d)" --web.listen-address 127.0.0.1:$PROM &
    # the workload: tools/dashboard-demo.sh workload (≈10 minutes of DnsZones)
    ~/.cache/orchard/dashboard-venv/bin/python deploy/helm/orchard/tools/render-dashboard.py \\
        --prometheus http://127.0.0.1:$PROM --minutes 15 --out docs/img/dashboard.png
    ORCHARD_TESTENV_DIR=/tmp/dash-env bash tests/env/testenv.sh down

matplotlib from PyPI, in a venv of its own (never system-wide):

    python3 -m venv ~/.cache/orchard/dashboard-venv
    ~/.cache/orchard/dashboard-venv/bin/pip install matplotlib==3.11.2

Exits non-zero when Prometheus cannot be reached or a query is refused (bad PromQL); a panel
whose queries return nothing is drawn as Grafana does, "No data", and listed on stderr.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.dates as mdates  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402
from matplotlib.ticker import FuncFormatter, MaxNLocator  # noqa: E402

CHART = Path(__file__).resolve().parent.parent

# Grafana's dark theme and its classic palette.
BACKGROUND = "#111217"
PANEL = "#181b1f"
BORDER = "#2c3235"
TEXT = "#ccccdc"
MUTED = "#8e8e9a"
GRID = "#2a2d33"
FLAT = "#5c616b"
PALETTE = [
    "#73bf69", "#f2cc0c", "#5794f2", "#ff9830", "#f2495c", "#b877d9",
    "#8ab8ff", "#fade2a", "#96d98d", "#ffb357", "#ff7383", "#ca95e5",
]


def query_range(base: str, expr: str, start: float, end: float, step: float) -> list[dict]:
    params = urllib.parse.urlencode(
        {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"}
    )
    url = f"{base.rstrip('/')}/api/v1/query_range?{params}"
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            body = json.load(response)
    except urllib.error.HTTPError as e:  # 400/422: the query itself is wrong
        detail = e.read().decode(errors="replace")
        raise SystemExit(f"Prometheus refused {expr!r}: HTTP {e.code}: {detail}") from e
    except urllib.error.URLError as e:
        raise SystemExit(f"cannot reach Prometheus at {base}: {e.reason}") from e
    if body.get("status") != "success":
        raise SystemExit(f"Prometheus refused {expr!r}: {body}")
    return body["data"]["result"]


def substitute(expr: str, variables: dict[str, str]) -> str:
    """Grafana's variable syntax: $name and ${name}."""
    for name, value in variables.items():
        expr = expr.replace("${" + name + "}", value).replace("$" + name, value)
    return expr


def legend(fmt: str | None, labels: dict[str, str], expr: str) -> str:
    if not fmt:
        name = labels.get("__name__", expr)
        rest = ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items()) if k != "__name__")
        return f"{name}{{{rest}}}" if rest else name
    return re.sub(r"\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}", lambda m: labels.get(m[1], ""), fmt).strip()


def si(value: float, suffix: str = "") -> str:
    if value == 0:
        return f"0{(' ' + suffix) if suffix else ''}"
    for factor, prefix in ((1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(value) >= factor:
            return f"{value / factor:.3g}{prefix}{(' ' + suffix) if suffix else ''}"
    return f"{value:.3g}{(' ' + suffix) if suffix else ''}"


def seconds(value: float) -> str:
    magnitude = abs(value)
    if magnitude == 0:
        return "0 s"
    for factor, unit in ((1e-6, "µs"), (1e-3, "ms"), (1, "s")):
        if magnitude < factor * 1000 or unit == "s":
            if unit == "s" and magnitude >= 60:
                return f"{value / 60:.3g} min"
            return f"{value / factor:.3g} {unit}"
    return f"{value:.3g} s"


def formatter(unit: str):
    if unit == "s":
        return FuncFormatter(lambda v, _: seconds(v))
    if unit in ("ops", "reqps"):
        return FuncFormatter(lambda v, _: si(v, "ops/s" if unit == "ops" else "req/s"))
    if unit == "percentunit":
        return FuncFormatter(lambda v, _: f"{v * 100:.3g}%")
    return FuncFormatter(lambda v, _: si(v))


def draw_panel(fig, rect, panel, series, start, end, unit):
    """One panel in `rect` (figure fractions: left, bottom, width, height)."""
    left, bottom, width, height = rect
    fig_w, fig_h = fig.get_size_inches()
    pad_x, pad_y = 0.06 / fig_w, 0.06 / fig_h
    fig.patches.append(
        Rectangle(
            (left + pad_x / 2, bottom + pad_y / 2), width - pad_x, height - pad_y,
            transform=fig.transFigure, facecolor=PANEL, edgecolor=BORDER, linewidth=0.8, zorder=-1,  # under the axes
        )
    )
    title_h = 0.32 / fig_h
    fig.text(left + 0.12 / fig_w, bottom + height - title_h * 0.75, panel.get("title", ""),
             color=TEXT, fontsize=10.5, fontweight="bold", va="center", ha="left")

    # The legend below the plot, as many columns as fit.
    names = [s["name"] for s in series]
    panel_w_in = width * fig_w
    longest = max((len(n) for n in names), default=10)
    col_in = min(panel_w_in - 0.3, max(1.6, 0.075 * longest + 0.45))
    ncol = max(1, min(len(names), int((panel_w_in - 0.3) // col_in)))
    legend_rows = math.ceil(len(names) / ncol) if names else 0
    legend_h = (legend_rows * 0.19 + 0.08) / fig_h if names else 0
    axis_left = left + 0.85 / fig_w
    axis_bottom = bottom + pad_y + legend_h + 0.3 / fig_h
    ax = fig.add_axes([
        axis_left, axis_bottom,
        left + width - 0.2 / fig_w - axis_left,
        bottom + height - title_h - 0.12 / fig_h - axis_bottom,
    ])
    ax.set_facecolor(PANEL)
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    ax.spines["bottom"].set_color(BORDER)
    ax.tick_params(colors=MUTED, labelsize=8, length=0, pad=4)
    ax.grid(True, color=GRID, linewidth=0.7)
    ax.set_axisbelow(True)
    ax.set_xlim(dt.datetime.fromtimestamp(start, dt.timezone.utc), dt.datetime.fromtimestamp(end, dt.timezone.utc))
    minutes = (end - start) / 60
    every = next((m for m in (1, 2, 5, 10, 15, 30, 60) if minutes / m <= 8), 120)
    ax.xaxis.set_major_locator(mdates.MinuteLocator(byminute=range(0, 60, every) if every < 60 else [0]))
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M", tz=dt.timezone.utc))
    ax.yaxis.set_major_locator(MaxNLocator(nbins=5))
    ax.yaxis.set_major_formatter(formatter(unit))

    if not series:
        ax.set_ylim(0, 1)
        ax.set_yticklabels([])
        ax.text(0.5, 0.5, "No data", transform=ax.transAxes, color=MUTED, fontsize=13,
                ha="center", va="center")
        return
    handles = []
    drawn = []
    colored = 0
    for s in series:
        if s["flat"]:  # zero (or no value) over the whole range: grey, under the others
            (line,) = ax.plot(s["t"], s["v"], color=FLAT, linewidth=1.0, label=s["name"], zorder=1)
        else:
            color = PALETTE[colored % len(PALETTE)]
            colored += 1
            # A line on top of one already drawn (ready and leader both 1) is dashed: both show.
            same = any(o["t"] == s["t"] and o["v"] == s["v"] for o in drawn)
            (line,) = ax.plot(s["t"], s["v"], color=color, linewidth=1.5, label=s["name"], zorder=2,
                              linestyle=(0, (4, 3)) if same else "-")
            drawn.append(s)
            ax.fill_between(s["t"], s["v"], color=color, alpha=0.08, linewidth=0)
        handles.append(line)
    low = min(min((v for v in s["v"] if v == v), default=0) for s in series)
    high = max(max((v for v in s["v"] if v == v), default=0) for s in series)
    if low >= 0:
        ax.set_ylim(0, high * 1.1 if high > 0 else 1)
    legend_top = axis_bottom - 0.3 / fig_h
    fig.legend(
        handles=handles, loc="upper left", bbox_to_anchor=(axis_left - 0.1 / fig_w, legend_top),
        bbox_transform=fig.transFigure, ncol=ncol, frameon=False, fontsize=8,
        labelcolor=TEXT, handlelength=1.4, handleheight=0.5, columnspacing=1.2,
        borderaxespad=0, borderpad=0, labelspacing=0.35,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prometheus", default="http://127.0.0.1:9091", help="Prometheus base URL")
    parser.add_argument("--dashboard", default=str(CHART / "files/dashboard.json"))
    parser.add_argument("--minutes", type=float, default=15, help="the time range: the last N minutes")
    parser.add_argument("--end", type=float, help="the range's end (Unix seconds; default: now)")
    parser.add_argument("--step", type=float, help="query step in seconds (default: range/240, at least 5)")
    parser.add_argument("--plugin", default=None, help="the $plugin variable (default: its allValue, All)")
    parser.add_argument("--out", default=str(CHART.parent.parent.parent / "docs/img/dashboard.png"))
    parser.add_argument("--width", type=float, default=20, help="figure width in inches")
    parser.add_argument("--dpi", type=int, default=110)
    args = parser.parse_args()

    dashboard = json.loads(Path(args.dashboard).read_text())
    variables = {}
    for var in dashboard.get("templating", {}).get("list", []):
        if var.get("type") == "datasource":
            continue
        value = args.plugin if (var["name"] == "plugin" and args.plugin) else var.get("allValue", ".*")
        variables[var["name"]] = value
    end = args.end or time.time()
    start = end - args.minutes * 60
    step = args.step or max(5.0, round(args.minutes * 60 / 240))

    panels = [p for p in dashboard["panels"] if p.get("type") != "row"]
    rows = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in panels)
    unit_in = args.width / 24  # one grid column
    row_in = 0.34  # one grid row (Grafana: 30 px of a 24-column ~1900 px wide dashboard)
    header_in = 0.55
    fig = plt.figure(figsize=(args.width, rows * row_in + header_in), facecolor=BACKGROUND)
    fig_w, fig_h = fig.get_size_inches()
    span = f"{dt.datetime.fromtimestamp(start, dt.timezone.utc):%Y-%m-%d %H:%M} – " \
           f"{dt.datetime.fromtimestamp(end, dt.timezone.utc):%H:%M} UTC"
    plugin = args.plugin or "All"
    fig.text(0.12 / fig_w, 1 - header_in / 2 / fig_h, dashboard.get("title", "Dashboard"),
             color=TEXT, fontsize=15, fontweight="bold", va="center")
    fig.text(1.5 / fig_w, 1 - header_in / 2 / fig_h,
             f"plugin: {plugin}    {span}    grey: zero or no value over the whole range    "
             "(files/dashboard.json's queries, drawn by tools/render-dashboard.py)",
             color=MUTED, fontsize=9.5, va="center")

    empty = []
    for panel in panels:
        g = panel["gridPos"]
        series = []
        for target in panel.get("targets", []):
            if target.get("hide"):
                continue
            expr = substitute(target["expr"], variables)
            for result in query_range(args.prometheus, expr, start, end, step):
                points = [(float(t), float(v)) for t, v in result["values"]]
                # Gaps (no sample for longer than two steps) break the line, as in Grafana.
                times, values = [], []
                for j, (t, v) in enumerate(points):
                    if j and t - points[j - 1][0] > 2 * step:
                        times.append(dt.datetime.fromtimestamp(t - step, dt.timezone.utc))
                        values.append(float("nan"))
                    times.append(dt.datetime.fromtimestamp(t, dt.timezone.utc))
                    values.append(v)
                series.append({
                    "name": legend(target.get("legendFormat"), result["metric"], expr),
                    "t": times, "v": values,
                })
        for s in series:
            s["flat"] = not any(v == v and v != 0 for v in s["v"])
        # The series that moved first, each in its own colour; then the flat ones.
        series.sort(key=lambda s: (s["flat"], s["name"]))
        if not series:
            empty.append(panel.get("title", "?"))
        unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit", "short")
        rect = (
            g["x"] * unit_in / fig_w,
            1 - (header_in + (g["y"] + g["h"]) * row_in) / fig_h,
            g["w"] * unit_in / fig_w,
            g["h"] * row_in / fig_h,
        )
        draw_panel(fig, rect, panel, series, start, end, unit)
        shown = ", ".join(s["name"] for s in series) or "no data"
        print(f"{panel.get('title')}: {len(series)} series ({shown})", file=sys.stderr)

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=args.dpi, facecolor=BACKGROUND)
    print(f"wrote {out} ({len(panels)} panels, {len(empty)} empty: {', '.join(empty) or 'none'})",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
