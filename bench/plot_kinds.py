#!/usr/bin/env python3
"""Plots every attention kind's benchmark families from attnkit_bench's Google Benchmark JSON.

    plot_kinds.py BENCHMARKS_JSON OUTPUT_DIR [REPORT_MD]

Writes OUTPUT_DIR/kinds_time.png (time of one call against n, log-log, each kind with its
fitted exponent over n >= min(4096, its largest n / 4)) and OUTPUT_DIR/kinds_gflops.png
(GFLOP/s on the attended pairs' FLOP, 2 pairs (D + Dv) plus a kind's extra work, against n).
Reads the median of the repetitions of each family attnkit/<kind>/D:64/threads:<all>, for the
kinds the JSON's context lists (attnkit_kinds). With REPORT_MD, appends the names of the
plots it wrote to that report (so a report names only plots that exist). Without matplotlib
(Debian: apt-get install -y python3-matplotlib) it says so, naming the interpreter, and exits
0: the report does not need it.
"""
import json
import math
import sys


def kinds(context):
    """[(family kind, label)] of the kinds compared, as attnkit_bench wrote them into the JSON's
    context ("kind=label;kind=label;..."; compared_kinds() in bench/kinds_report.hpp)."""
    entries = context.get("attnkit_kinds", "")
    return [tuple(entry.split("=", 1)) for entry in entries.split(";") if "=" in entry]


def families(benchmarks, threads):
    """{kind: [(n, seconds, gflops)]} from the median aggregates (or single runs)."""
    result = {}
    for run in benchmarks:
        parts = run["run_name"].split("/")
        if len(parts) < 5 or parts[0] != "attnkit" or parts[2] != "D:64" or parts[3] != f"threads:{threads}":
            continue
        median = run.get("run_type") == "aggregate" and run.get("aggregate_name") == "median"
        single = run.get("run_type") == "iteration" and run.get("repetitions", 1) <= 1
        if not (median or single):
            continue
        scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[run["time_unit"]]
        result.setdefault(parts[1], []).append((int(parts[4]), run["real_time"] * scale, run.get("GFLOP/s", 0.0)))
    return {kind: sorted(points) for kind, points in result.items()}


def exponent(points):
    """Least-squares slope of log time against log n over n >= min(4096, largest n / 4): the
    range of the report's all-kinds table (kinds_fit_from)."""
    first_n = min(4096, points[-1][0] // 4)
    xy = [(math.log(n), math.log(t)) for n, t, _ in points if n >= first_n]
    if len(xy) < 2:
        return None
    mx = sum(x for x, _ in xy) / len(xy)
    my = sum(y for _, y in xy) / len(xy)
    return sum((x - mx) * (y - my) for x, y in xy) / sum((x - mx) ** 2 for x, _ in xy)


def main(argv):
    if len(argv) not in (3, 4):
        print(__doc__)
        return 2
    with open(argv[1]) as f:
        data = json.load(f)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"plot_kinds.py: {sys.executable} has no matplotlib (Debian: apt-get install -y python3-matplotlib, "
              "for /usr/bin/python3); no plots written")
        return 0
    threads = data["context"]["num_cpus"]
    found = families(data["benchmarks"], threads)
    written = []
    cpu = f'{data["context"].get("host_name", "")}: {threads} CPUs, {data["context"].get("mhz_per_cpu", 0)} MHz'
    for name, column, ylabel in (("kinds_time.png", 1, "time of one call (s)"),
                                 ("kinds_gflops.png", 2, "GFLOP/s (attended pairs' FLOP)")):
        figure, axes = plt.subplots(figsize=(9, 6))
        # Matplotlib's default cycle has 10 colours: more kinds than that get markers too.
        for index, (kind, label) in enumerate(kinds(data["context"])):
            points = found.get(kind)
            if not points:
                continue
            slope = exponent(points)
            tag = f"{label} (O(n^{slope:.2f}))" if column == 1 and slope is not None else label
            axes.plot([p[0] for p in points], [p[column] for p in points], label=tag, color=f"C{index % 10}",
                      marker="os^vDPX*h<>"[index % 11], linestyle="-" if index < 10 else "--")
        axes.set_xscale("log", base=2)
        if column == 1:
            axes.set_yscale("log")
        axes.set_xlabel("sequence length n (H = 8, D = Dv = 64, fp32)")
        axes.set_ylabel(ylabel)
        axes.set_title(f"attnkit, every kind, {threads} threads ({cpu})", fontsize=9)
        axes.grid(True, which="both", alpha=0.3)
        axes.legend(fontsize=8)
        figure.tight_layout()
        figure.savefig(f"{argv[2]}/{name}", dpi=110)
        print(f"plot_kinds.py: wrote {argv[2]}/{name}")
        written.append(name)
    if len(argv) == 4 and written:
        with open(argv[3], "a") as report:
            report.write(f"\nPlots of the families above (bench/plot_kinds.py): {', '.join(written)} next to this file.\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
