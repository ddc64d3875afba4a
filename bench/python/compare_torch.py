#!/usr/bin/env python3
"""attnkit's Python calls against the plain PyTorch formulation a user would write, and the
binding's own cost. One process, calls alternating; each figure is the median of per-pair ratios
(README "Python"). Run with Debian's /usr/bin/python3 after `cmake --workflow --preset python`:

    /usr/bin/python3 bench/python/compare_torch.py [--n 4096] [--heads 12] [--dim 64] [--threads 2] [--pairs 7]
"""

import argparse
import math
import platform
import re
import statistics
import time

import numpy as np
import torch

import attnkit


def cpu_model():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def torch_blas():
    """The BLAS library the process has loaded after a matmul (Debian's torch calls the system
    libblas.so.3, whichever alternative it points to: reference BLAS, OpenBLAS, BLIS, MKL)."""
    torch.ones(64, 64) @ torch.ones(64, 64)
    libraries = set()
    for line in open("/proc/self/maps"):
        path = line.split()[-1]
        if re.search(r"(blas|blis|mkl)[^/]*\.so", path):
            libraries.add(path)
    config = re.search(r"BLAS_INFO=([^,\s]+)", torch.__config__.show())
    built = config.group(1) if config else "unknown"
    return f"built with {built}, loaded: {', '.join(sorted(libraries)) or 'none found'}"


def timed(call):
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def paired(first, second, pairs):
    """Median [min, max] of second-time / first-time over alternating calls (one warm-up each)."""
    first()
    second()
    ratios, first_times = [], []
    for _ in range(pairs):
        a = timed(first)
        b = timed(second)
        ratios.append(b / a)
        first_times.append(a)
    return statistics.median(ratios), min(ratios), max(ratios), statistics.median(first_times)


# The plain torch formulations.
def dense_masked(q, k, v, mask, scale):
    """softmax(q k^T scale + additive mask) v with a dense [L, L] (or [H, L, L]) additive mask."""
    return torch.softmax(q @ k.transpose(-1, -2) * scale + mask, dim=-1) @ v


def additive(mask):
    return torch.zeros(mask.shape).masked_fill_(~mask, float("-inf"))


def chunked_window(q, k, v, radius, scale):
    """HF Longformer's idea without its padding tricks: chunks of `radius` rows attend the keys of
    their own and both neighbouring chunks, with the band masked inside (3 radius keys per row)."""
    n = q.shape[2]
    out = torch.empty_like(q)
    rows = torch.arange(radius)[:, None]
    for start in range(0, n, radius):
        end = min(start + radius, n)
        key_begin, key_end = max(start - radius, 0), min(end + radius, n)
        scores = q[:, :, start:end] @ k[:, :, key_begin:key_end].transpose(-1, -2) * scale
        offsets = torch.arange(key_begin, key_end)[None, :] - (start + rows[: end - start])
        scores = scores.masked_fill(offsets.abs() > radius, float("-inf"))
        out[:, :, start:end] = torch.softmax(scores, dim=-1) @ v[:, :, key_begin:key_end]
    return out


def masks(n, heads, radius, blocks):
    i = torch.arange(n)[:, None]
    j = torch.arange(n)[None, :]
    window = (j - i).abs() <= radius
    causal = j <= i
    tokens = torch.zeros(n, dtype=torch.bool)
    tokens[[0, n // 2]] = True
    longformer = window | tokens[:, None] | tokens[None, :]
    block = n // blocks
    local = (i // block - j // block).abs() <= 1
    return {"causal": causal, "window": window, "longformer": longformer, "local": local}


def big_bird_mask(bird, n, heads):
    b = bird.block_size
    blocks = n // b
    table = bird.random_table(heads, blocks)
    mask = torch.zeros(heads, blocks, blocks, dtype=torch.bool)
    for h in range(heads):
        for p in range(blocks):
            if p in (0, blocks - 1):
                mask[h, p, :] = True
                continue
            mask[h, p, [0, blocks - 1, p - 1, p, p + 1]] = True
            mask[h, p, [c for c in table[h, p] if c >= 0]] = True
    return mask.repeat_interleave(b, 1).repeat_interleave(b, 2)


def comparisons(n, heads, dim, threads, pairs):
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, heads, n, dim) for _ in range(3))
    scale = 1 / math.sqrt(dim)
    radius = 256
    m = masks(n, heads, radius, 16)
    bird = attnkit.BigBird(64, 3, seed=1)
    linformer = attnkit.Linformer.gaussian(256, n, 1, seed=2)
    e = torch.from_numpy(attnkit.Linformer.gaussian_projection(256, n, 1, seed=2, stream=1))[0]
    rpe_bias = torch.linspace(-2, 0, 2 * n - 1)
    offsets = torch.arange(n)[None, :] - torch.arange(n)[:, None] + n - 1
    blocks = attnkit.BlockSparse(n // 16, [attnkit.BlockLayout.from_bitmap(
        (abs(np.arange(16)[:, None] - np.arange(16)[None, :]) <= 1).astype(np.uint8))])
    window_mask, causal_mask, long_mask, local_mask = (additive(m[key]) for key in ("window", "causal", "longformer",
                                                                                      "local"))
    bird_mask = additive(big_bird_mask(bird, n, heads))
    rpe_values = rpe_bias[offsets]
    run = lambda p, x=q: (lambda: attnkit.attention(p, x, k if x is q else x, v, threads=threads))  # noqa: E731
    cases = [
        ("Full", run(attnkit.Full()), lambda: torch.softmax(q @ k.transpose(-1, -2) * scale, -1) @ v,
         "softmax(q k^T s) v"),
        ("Full causal", run(attnkit.Full(causal=True)), lambda: dense_masked(q, k, v, causal_mask, scale),
         "dense additive mask"),
        ("SlidingWindow r=256", run(attnkit.SlidingWindow.symmetric(radius)),
         lambda: dense_masked(q, k, v, window_mask, scale), "dense additive mask"),
        ("SlidingWindow r=256", run(attnkit.SlidingWindow.symmetric(radius)),
         lambda: chunked_window(q, k, v, radius, scale), "chunked windows (Longformer-style)"),
        ("Longformer (window + 2 global)", run(attnkit.Union(attnkit.SlidingWindow.symmetric(radius),
                                                             attnkit.Global([0, n // 2]))),
         lambda: dense_masked(q, k, v, long_mask, scale), "dense additive mask"),
        ("BlockSparse (local, 16 blocks)", run(blocks), lambda: dense_masked(q, k, v, local_mask, scale),
         "dense additive mask"),
        ("BigBird b=64 r=3", run(bird), lambda: dense_masked(q, k, v, bird_mask, scale), "dense additive mask [H]"),
        ("Linformer kp=256", run(linformer),
         lambda: torch.softmax(q @ (e @ k).transpose(-1, -2) * scale, -1) @ (e @ v), "project, then softmax"),
        ("Lsh chunk=64 r=2 (x, x, v)", lambda: attnkit.attention(attnkit.Lsh(rounds=2), q, q, v, threads=threads),
         lambda: torch.softmax(q @ q.transpose(-1, -2) * scale, -1) @ v, "full shared-QK softmax"),
        ("KernelizedRpe m=64", run(attnkit.KernelizedRpe(features=64)),
         lambda: dense_masked(q, k, v, rpe_values, scale), "softmax with a dense bias (what it estimates)"),
    ]
    print(f"\n## Kinds against torch: n = {n}, {heads} heads, D = {dim}, float32, B = 1, {threads} threads")
    print("| kind | torch formulation | attnkit ms | torch / attnkit, median [min, max] |")
    print("|---|---|---|---|")
    for name, ours, theirs, formulation in cases:
        ratio, low, high, ours_time = paired(ours, theirs, pairs)
        print(f"| {name} | {formulation} | {ours_time * 1e3:.1f} | {ratio:.2f}x [{low:.2f}, {high:.2f}] |")


def overhead(threads, repeats):
    """Python call time minus the C++ call's own time (attnkit._attnkit._native_call_ns), paired."""
    native = attnkit._attnkit._native_call_ns
    print("\n## Binding overhead (Python call - C++ call, median of pairs)")
    print("| call | overhead us | C++ call us |")
    print("|---|---|---|")
    for library in ("numpy", "torch"):
        x = np.ones((1, 1, 16, 16), np.float32)
        out = np.empty_like(x)
        if library == "torch":
            x, out = torch.from_numpy(x), torch.from_numpy(out)
        full = attnkit.Full()
        for label, call in (("out given", lambda: attnkit.attention(full, x, x, x, out=out, threads=threads)),
                            ("out allocated", lambda: attnkit.attention(full, x, x, x, threads=threads))):
            differences, natives = [], []
            for _ in range(repeats):
                start = time.perf_counter_ns()
                call()
                python_ns = time.perf_counter_ns() - start
                native_ns = native(full, x, x, x, out, threads)
                differences.append(python_ns - native_ns)
                natives.append(native_ns)
            print(f"| 1x1x16x16 full, {library}, {label} | {statistics.median(differences) / 1e3:.2f} | "
                  f"{statistics.median(natives) / 1e3:.2f} |")


def large_call(n, heads, dim, threads, pairs):
    native = attnkit._attnkit._native_call_ns
    print(f"\n## Python call over the C++ call at n = {n} ({heads} heads, D = {dim}, {threads} threads)")
    print("| kind | Python / C++, median [min, max] | C++ ms |")
    print("|---|---|---|")
    q, k, v = (torch.randn(1, heads, n, dim) for _ in range(3))
    out = torch.empty_like(q)
    for pattern in (attnkit.Full(causal=True), attnkit.SlidingWindow.symmetric(256)):
        ratios, natives = [], []
        attnkit.attention(pattern, q, k, v, out=out, threads=threads)
        for _ in range(pairs):
            start = time.perf_counter_ns()
            attnkit.attention(pattern, q, k, v, out=out, threads=threads)
            python_ns = time.perf_counter_ns() - start
            native_ns = native(pattern, q, k, v, out, threads)
            ratios.append(python_ns / native_ns)
            natives.append(native_ns)
        print(f"| {pattern!r} | {statistics.median(ratios):.4f} [{min(ratios):.4f}, {max(ratios):.4f}] | "
              f"{statistics.median(natives) / 1e6:.1f} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=4096)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--pairs", type=int, default=7)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"CPU: {cpu_model()}; torch {torch.__version__} ({torch.get_num_threads()} threads); "
          f"attnkit dispatch target: {attnkit.dispatch.simd_target().name}")
    # First, before any torch matmul: afterwards OpenMP's idle workers spin for a while on
    # the cores these microsecond calls run on.
    overhead(args.threads, 5000)
    print(f"\ntorch's BLAS: {torch_blas()}")
    large_call(args.n, args.heads, args.dim, args.threads, 2 * args.pairs + 1)
    comparisons(args.n, args.heads, args.dim, args.threads, args.pairs)


if __name__ == "__main__":
    main()
