"""Plots several throughput runs of the same contenders (bench/run.sh, one results.json each) side
by side: the operator's CPU per object and the time to all Available, each contender's median
over the runs as a bar and its lowest and highest run as a whisker, the floor's median as a
line. Usage: plot_ratios.py OUT.png RESULTS.json [RESULTS.json ...]"""

import json
import statistics
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# What each panel shows: a results.json key and the axis label.
PANELS = (
    ("cpu_ms_per_object", "operator CPU per object (ms, create + delete)"),
    ("available_s", "time to all Available (s)"),
)


def main():
    out = Path(sys.argv[1])
    runs = [json.loads(Path(p).read_text()) for p in sys.argv[2:]]
    # Contenders in the order of the first run's listing, then any other.
    names = []
    for run in runs:
        for r in run["results"]:
            if r["contender"] not in names:
                names.append(r["contender"])
    n = runs[0].get("objects", 0)
    fig, axes = plt.subplots(1, len(PANELS), figsize=(11, 4), dpi=90)
    for ax, (key, label) in zip(axes, PANELS):
        values = {
            name: [r[key] for run in runs for r in run["results"] if r["contender"] == name]
            for name in names
        }
        medians = [statistics.median(values[name]) for name in names]
        low = [m - min(values[name]) for m, name in zip(medians, names)]
        high = [max(values[name]) - m for m, name in zip(medians, names)]
        colors = ["tab:green" if name.startswith("orchard") else "tab:gray" for name in names]
        ax.bar(range(len(names)), medians, yerr=[low, high], capsize=4, color=colors)
        if "floor" in values:
            ax.axhline(statistics.median(values["floor"]), color="black", linewidth=0.8, linestyle="--")
        for i, m in enumerate(medians):
            ax.annotate(f"{m:.2f}", (i, m), textcoords="offset points", xytext=(8, 3), fontsize=8)
        ax.set_xticks(range(len(names)), names, rotation=25, ha="right", fontsize=8)
        ax.set_ylabel(label, fontsize=9)
        ax.set_ylim(bottom=0)
    fig.suptitle(
        f"N={n}, median of {len(runs)} runs (whiskers: lowest and highest run; dashed: the floor)",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(out)
    print(out)


if __name__ == "__main__":
    main()
