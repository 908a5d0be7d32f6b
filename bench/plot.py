"""Plots a throughput run (bench/run.sh): objects Available over time while creating, and objects
remaining while deleting, one curve per contender. Usage: plot.py RESULTS_DIR [OUT.png]"""

import csv
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    out_dir = Path(sys.argv[1])
    png = Path(sys.argv[2]) if len(sys.argv) > 2 else out_dir / "throughput.png"
    report = json.loads((out_dir / "results.json").read_text())
    fig, (ax_c, ax_d) = plt.subplots(1, 2, figsize=(10, 4), dpi=90)
    for r in report["results"]:
        name = r["contender"]
        path = out_dir / f"{name}.csv"
        if not path.exists():
            continue
        rows = list(csv.DictReader(path.open()))
        n = r.get("objects", 0)
        label = f"{name} ({r.get('kind', '')}, N={n})"
        for ax, phase, key in ((ax_c, "create", "available"), (ax_d, "delete", "existing")):
            pts = [(float(x["t_s"]), int(x[key])) for x in rows if x["phase"] == phase]
            if pts:
                ax.step([p[0] for p in pts], [p[1] for p in pts], where="post", label=label)
    commit = report.get("commit", "")
    ax_c.set_title("objects Available (after creating N at once)")
    ax_d.set_title("objects remaining (after deleting all)")
    for ax in (ax_c, ax_d):
        ax.set_xlabel("seconds")
        ax.set_ylabel("objects")
        ax.grid(alpha=0.3)
    ax_c.legend(fontsize=8, loc="lower right")
    fig.suptitle(f"Orchard throughput, {report.get('clients', 8)} parallel clients, commit {commit}", fontsize=10)
    fig.tight_layout()
    fig.savefig(png)
    print(png)


if __name__ == "__main__":
    main()
