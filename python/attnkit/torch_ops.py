"""attnkit's kinds as PyTorch operators: ``import attnkit.torch_ops`` registers them through
``torch.library`` (torch >= 1.13), after which a model calls ``torch.ops.attnkit.<kind>(...)``.

Each operator takes q [B, Hq, Lq, D], k [B, Hk, Lk, D], v [B, Hk, Lk, Dv] CPU tensors (float32,
float64, bfloat16, float16; any strides with a unit last one), the kind's parameters and an
optional ``scale``, and returns a new [B, Hq, Lq, Dv] tensor of q's dtype. They run forward only
(no autograd formula: for inference), on the CPU dispatch key.
"""

import torch

import attnkit

_SCALE = "float? scale=None, int threads=0"

_SCHEMAS = {
    "full": f"full(Tensor q, Tensor k, Tensor v, bool causal=False, {_SCALE}) -> Tensor",
    "sliding_window": f"sliding_window(Tensor q, Tensor k, Tensor v, int left, int right, int sinks=0, {_SCALE}) -> Tensor",
    "dilated": f"dilated(Tensor q, Tensor k, Tensor v, int left, int right, int[] dilations, {_SCALE}) -> Tensor",
    "global_tokens": f"global_tokens(Tensor q, Tensor k, Tensor v, int[] tokens, {_SCALE}) -> Tensor",
    "longformer": (f"longformer(Tensor q, Tensor k, Tensor v, int left, int right, int[] global_tokens, "
                   f"Tensor? qg=None, Tensor? kg=None, Tensor? vg=None, {_SCALE}) -> Tensor"),
    "block_sparse": (f"block_sparse(Tensor q, Tensor k, Tensor v, int block_size, Tensor layouts, bool causal=False, "
                     f"{_SCALE}) -> Tensor"),
    "big_bird": (f"big_bird(Tensor q, Tensor k, Tensor v, int block_size=64, int random_blocks=3, int seed=0, "
                 f"int layer=0, Tensor? table=None, {_SCALE}) -> Tensor"),
    "linformer": f"linformer(Tensor q, Tensor k, Tensor v, int kp, Tensor e, Tensor? f=None, {_SCALE}) -> Tensor",
    "lsh": (f"lsh(Tensor x, Tensor v, int chunk=64, int rounds=1, int buckets=0, int[] bucket_factors=[], int before=1, int after=0, "
            f"bool causal=False, int seed=0, int layer=0, int max_positions=0, Tensor? rotations=None, "
            f"float key_epsilon=0.0, {_SCALE}) -> Tensor"),
    "kernelized_rpe": (f"kernelized_rpe(Tensor q, Tensor k, Tensor v, int features=64, str map='positive', "
                       f"bool orthogonal=False, float temperature=1.0, int seed=0, int layer=0, Tensor? bias=None, "
                       f"bool causal=False, {_SCALE}) -> Tensor"),
}


def _run(pattern, q, k, v, scale, threads):
    return attnkit.attention(pattern, q, k, v, scale=scale, threads=threads)


def _full(q, k, v, causal=False, scale=None, threads=0):
    return _run(attnkit.Full(causal=causal), q, k, v, scale, threads)


def _sliding_window(q, k, v, left, right, sinks=0, scale=None, threads=0):
    """sinks: the first keys every row sees up to its own position (StreamingLLM; right must be 0)."""
    return _run(attnkit.SlidingWindow(left, right, sinks), q, k, v, scale, threads)


def _dilated(q, k, v, left, right, dilations, scale=None, threads=0):
    return _run(attnkit.Dilated(left, right, dilations), q, k, v, scale, threads)


def _global_tokens(q, k, v, tokens, scale=None, threads=0):
    return _run(attnkit.Global(tokens), q, k, v, scale, threads)


def _longformer(q, k, v, left, right, global_tokens, qg=None, kg=None, vg=None, scale=None, threads=0):
    """qg, kg, vg: Longformer's separate global projections (all three, shaped as q, k, v), or None."""
    pattern = attnkit.Union(attnkit.SlidingWindow(left, right), attnkit.Global(global_tokens))
    given = [x is not None for x in (qg, kg, vg)]
    if any(given) and not all(given):
        raise ValueError("attnkit: qg, kg, vg: give all three global projections or none")
    global_qkv = (qg, kg, vg) if all(given) else None
    return attnkit.attention(pattern, q, k, v, scale=scale, threads=threads, global_qkv=global_qkv)


def _block_sparse(q, k, v, block_size, layouts, causal=False, scale=None, threads=0):
    """layouts: bool or 0/1 [P, query_blocks, key_blocks], P = 1 (shared) or Hq."""
    bitmaps = layouts.detach().to(torch.uint8).cpu().numpy()
    if bitmaps.ndim == 2:
        bitmaps = bitmaps[None]
    pattern = attnkit.BlockSparse(block_size, [attnkit.BlockLayout.from_bitmap(b) for b in bitmaps], causal)
    return _run(pattern, q, k, v, scale, threads)


def _big_bird(q, k, v, block_size=64, random_blocks=3, seed=0, layer=0, table=None, scale=None, threads=0):
    """table: HF's rand_attn [heads, blocks - 2, r] (random_blocks, seed and layer are then unused), or None."""
    if table is None:
        pattern = attnkit.BigBird(block_size, random_blocks, seed, layer)
    else:
        pattern = attnkit.BigBird.from_table(block_size, table.detach().to(torch.int64).cpu().numpy())
    return _run(pattern, q, k, v, scale, threads)


def _linformer(q, k, v, kp, e, f=None, scale=None, threads=0):
    """e, f: [P, kp, n_max] projections (P = 1 or Hk)."""
    n_max = e.shape[-1]
    to_numpy = lambda x: x.detach().float().cpu().numpy()  # noqa: E731 (parameters are copied into the pattern)
    pattern = attnkit.Linformer(kp, n_max, to_numpy(e), None if f is None else to_numpy(f))
    return _run(pattern, q, k, v, scale, threads)


def _lsh(x, v, chunk=64, rounds=1, buckets=0, bucket_factors=(), before=1, after=0, causal=False, seed=0, layer=0,
         max_positions=0, rotations=None, key_epsilon=0.0, scale=None, threads=0):
    """buckets: a count (0: HF's automatic rule); bucket_factors: [f1, f2] (HF's factorized num_buckets; buckets is
    then unused); rotations: HF's random_rotations [H, D, R, columns] or None (drawn from seed and layer);
    key_epsilon: 1e-6 for HF/trax checkpoints."""
    pattern = attnkit.Lsh(chunk=chunk, rounds=rounds, buckets=list(bucket_factors) if bucket_factors else buckets,
                          before=before, after=after, causal=causal, seed=seed, layer=layer,
                          max_positions=max_positions,
                          rotations=None if rotations is None else rotations.detach().float().cpu().numpy(),
                          key_epsilon=key_epsilon)
    return _run(pattern, x, x, v, scale, threads)


def _kernelized_rpe(q, k, v, features=64, map="positive", orthogonal=False, temperature=1.0, seed=0, layer=0,
                    bias=None, causal=False, scale=None, threads=0):
    """bias: [P, 2 max_distance + 1] relative-position bias values (P = 1 or Hq), or None."""
    rpe_bias = attnkit.RpeBias()
    if bias is not None:
        values = bias.detach().float().cpu().numpy()
        rpe_bias = attnkit.RpeBias((values.shape[-1] - 1) // 2, values)
    pattern = attnkit.KernelizedRpe(features=features, map=attnkit.FeatureMap.__members__[map],
                                    orthogonal=orthogonal, temperature=temperature, seed=seed, layer=layer,
                                    bias=rpe_bias, causal=causal)
    return _run(pattern, q, k, v, scale, threads)


_IMPLEMENTATIONS = {
    "full": _full,
    "sliding_window": _sliding_window,
    "dilated": _dilated,
    "global_tokens": _global_tokens,
    "longformer": _longformer,
    "block_sparse": _block_sparse,
    "big_bird": _big_bird,
    "linformer": _linformer,
    "lsh": _lsh,
    "kernelized_rpe": _kernelized_rpe,
}

# One registration per process (a second import of this module is a no-op: Python caches it).
_library = torch.library.Library("attnkit", "DEF")
for _name, _schema in _SCHEMAS.items():
    _library.define(_schema)
    _library.impl(_name, _IMPLEMENTATIONS[_name], "CPU")

operators = tuple(_SCHEMAS)
"""The names registered under torch.ops.attnkit."""
