"""Issue 25's scale curve (docs/benchmarks.md "Scale"): time to all Available, time to all
deleted and the host's peak RSS against N, from bench/results/<date>-scale-n<N>.json.

    python bench/plot_scale.py [--date 2026-12-03 --date 2026-12-06 --date 2026-12-07] [--out docs/img/scale-curve.png]

Each --date adds that day's runs (one point per N; a later date's N replaces an earlier one's).
"""

import argparse
import glob
import json
import os
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load(dates):
    rows = {}
    for date in dates:
        for path in glob.glob(os.path.join(ROOT, "bench", "results", f"{date}-scale-n*.json")):
            if not re.search(r"-scale-n\d+\.json$", path):
                continue
            with open(path) as f:
                r = json.load(f)["results"][0]
            rows[r["objects"]] = r
    return [rows[n] for n in sorted(rows)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--date", action="append", help="default: 2026-12-03, 2026-12-06 and 2026-12-07")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "img", "scale-curve.png"))
    a = ap.parse_args()
    rows = load(a.date or ["2026-12-03", "2026-12-06", "2026-12-07"])
    if not rows:
        raise SystemExit("no scale results")
    n = [r["objects"] for r in rows]
    avail = [r["available_s"] for r in rows]
    deleted = [r["deleted_s"] for r in rows]
    rss = [r["rss_peak_mib"] for r in rows]

    fig, ax = plt.subplots(figsize=(8, 5))
    ax.plot(n, avail, "o-", color="tab:blue", label="time to all Available")
    ax.plot(n, deleted, "s-", color="tab:orange", label="time to all deleted")
    # linear scaling from the smallest N, for reference
    ax.plot(n, [avail[0] * x / n[0] for x in n], ":", color="tab:blue", alpha=0.5,
            label=f"linear from N={n[0]:,} (Available)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("objects N (DnsZone, 8 clients)")
    ax.set_ylabel("seconds")
    ax.grid(True, which="both", alpha=0.3)
    for x, y in zip(n, avail):
        ax.annotate(f"{y:.0f} s", (x, y), textcoords="offset points", xytext=(-10, 8), fontsize=8,
                    color="tab:blue")
    for x, y in zip(n, deleted):
        ax.annotate(f"{y:.0f} s", (x, y), textcoords="offset points", xytext=(4, -14), fontsize=8,
                    color="tab:orange")

    ax2 = ax.twinx()
    ax2.plot(n, rss, "^--", color="tab:green", label="host peak RSS (VmHWM)")
    for x, y in zip(n, rss):
        ax2.annotate(f"{y:.0f} MiB", (x, y), textcoords="offset points", xytext=(4, 6), fontsize=8,
                     color="tab:green")
    ax2.scatter([10_000, 100_000], [128, 512], marker="_", s=400, color="tab:red",
                label="RSS targets (128 MiB @10k, 512 MiB @100k)")
    ax2.set_ylabel("MiB")
    ax2.set_ylim(0, max(max(rss), 512) * 1.15)

    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, loc="upper left", fontsize=8)
    ax.set_title("One Orchard host (orchard-component), N DnsZones: create, delete, memory")
    fig.tight_layout()
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    fig.savefig(a.out, dpi=110)
    print(a.out)


if __name__ == "__main__":
    main()
