#!/usr/bin/env python3
"""Plots every attention kind's benchmark families from attnkit_bench's Google Benchmark JSON.

    plot_kinds.py BENCHMARKS_JSON OUTPUT_DIR

Writes OUTPUT_DIR/kinds_time.png (time of one call against n, log-log, each kind with its
fitted exponent over n >= 4096) and OUTPUT_DIR/kinds_gflops.png (GFLOP/s on the attended
pairs' FLOP, 2 pairs (D + Dv) plus a kind's extra work, against n). Reads the median of the
repetitions of each family attnkit/<kind>/D:64/threads:<all>. Without matplotlib (Debian:
apt-get install -y python3-matplotlib) it says so and exits 0: the report does not need it.
"""
import json
import math
import sys

# (family kind, label): the kinds of the mission, one configuration each; the same list as
# compared_kinds() in bench/kinds_report.hpp, whose table these plots go with.
KINDS = [
    ("full", "full"),
    ("causal", "causal"),
    ("window_r256", "window r = 256"),
    ("dilated_r256_d4", "dilated r = 256, d = 4"),
    ("longformer_r256_global1", "Longformer r = 256, 1 global"),
    ("block64_band5_global1", "block-sparse b = 64"),
    ("bigbird_b64_r3", "BigBird b = 64, r = 3"),
    ("lsh_r2", "LSH R = 2"),
    ("linformer_kp256", "Linformer kp = 256"),
    ("rpe_fft_m32", "FFT-RPE m = 32"),
]


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


def exponent(points, first_n=4096):
    """Least-squares slope of log time against log n over n >= first_n."""
    xy = [(math.log(n), math.log(t)) for n, t, _ in points if n >= first_n]
    if len(xy) < 2:
        return None
    mx = sum(x for x, _ in xy) / len(xy)
    my = sum(y for _, y in xy) / len(xy)
    return sum((x - mx) * (y - my) for x, y in xy) / sum((x - mx) ** 2 for x, _ in xy)


def main(argv):
    if len(argv) != 3:
        print(__doc__)
        return 2
    with open(argv[1]) as f:
        data = json.load(f)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_kinds.py: matplotlib is missing (apt-get install -y python3-matplotlib); no plots written")
        return 0
    threads = data["context"]["num_cpus"]
    found = families(data["benchmarks"], threads)
    cpu = f'{data["context"].get("host_name", "")}: {threads} CPUs, {data["context"].get("mhz_per_cpu", 0)} MHz'
    for name, column, ylabel in (("kinds_time.png", 1, "time of one call (s)"),
                                 ("kinds_gflops.png", 2, "GFLOP/s (attended pairs' FLOP)")):
        figure, axes = plt.subplots(figsize=(9, 6))
        for kind, label in KINDS:
            points = found.get(kind)
            if not points:
                continue
            slope = exponent(points)
            tag = f"{label} (O(n^{slope:.2f}))" if column == 1 and slope is not None else label
            axes.plot([p[0] for p in points], [p[column] for p in points], marker="o", label=tag)
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
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
