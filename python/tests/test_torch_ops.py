"""torch.ops.attnkit: every registered operator callable, equal to attnkit.attention with the same
pattern, and checked against a NumPy softmax where the kind is a mask."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import attnkit  # noqa: E402
import attnkit.torch_ops  # noqa: E402,F401 (registers torch.ops.attnkit)
from conftest import assert_float_close, dense_attention, global_mask, qkv, window_mask  # noqa: E402


@pytest.fixture
def tensors(rng):
    return [torch.from_numpy(x) for x in qkv(rng, hq=4, hk=4, lq=64, lk=64)]


def test_every_kind_has_an_operator():
    assert set(attnkit.torch_ops.operators) == {"full", "sliding_window", "dilated", "global_tokens", "longformer",
                                                "block_sparse", "big_bird", "linformer", "lsh", "kernelized_rpe"}


def test_longformer_operator_matches_a_numpy_softmax(tensors):
    q, k, v = tensors
    out = torch.ops.attnkit.longformer(q, k, v, 4, 4, [0, 31], scale=0.5)
    mask = window_mask(4, 64, 64, 4, 4) | global_mask(4, 64, 64, [0, 31])
    expected, _ = dense_attention(q.numpy(), k.numpy(), v.numpy(), mask, scale=0.5)
    assert_float_close(out.numpy(), expected, v.numpy())


def test_operators_equal_attention(tensors):
    q, k, v = tensors
    layout = torch.tensor([[1, 0, 0, 0], [1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 1]], dtype=torch.bool)
    e = torch.from_numpy(attnkit.Linformer.gaussian_projection(8, 64, 1, seed=2))
    bias = torch.linspace(-1, 1, 9)[None]
    cases = [
        (torch.ops.attnkit.full(q, k, v, True), attnkit.Full(causal=True), (q, k, v)),
        (torch.ops.attnkit.sliding_window(q, k, v, 3, 2), attnkit.SlidingWindow(3, 2), (q, k, v)),
        (torch.ops.attnkit.dilated(q, k, v, 2, 2, [1, 2, 1, 2]), attnkit.Dilated(2, 2, [1, 2, 1, 2]), (q, k, v)),
        (torch.ops.attnkit.global_tokens(q, k, v, [5]), attnkit.Global([5]), (q, k, v)),
        (torch.ops.attnkit.block_sparse(q, k, v, 16, layout), attnkit.BlockSparse(
            16, [attnkit.BlockLayout.from_bitmap(layout.numpy())]), (q, k, v)),
        (torch.ops.attnkit.big_bird(q, k, v, 16, 1, 3), attnkit.BigBird(16, 1, 3), (q, k, v)),
        (torch.ops.attnkit.linformer(q, k, v, 8, e), attnkit.Linformer(8, 64, e.numpy()), (q, k, v)),
        (torch.ops.attnkit.lsh(q, v, chunk=8, buckets=8, seed=4), attnkit.Lsh(chunk=8, buckets=8, seed=4), (q, q, v)),
        (torch.ops.attnkit.kernelized_rpe(q, k, v, 16, "trigonometric", bias=bias),
         attnkit.KernelizedRpe(features=16, map=attnkit.FeatureMap.trigonometric,
                               bias=attnkit.RpeBias(4, bias.numpy())), (q, k, v)),
    ]
    for result, pattern, inputs in cases:
        assert result.shape == (2, 4, 64, 8) and result.dtype == torch.float32
        assert torch.equal(result, attnkit.attention(pattern, *inputs)), repr(pattern)


def test_operator_errors_are_value_errors(tensors):
    q, k, v = tensors
    with pytest.raises((ValueError, RuntimeError), match="SlidingWindow"):
        torch.ops.attnkit.sliding_window(q, k, v, -1, 2)


def test_checkpoint_parameters_reach_the_operators(tensors):
    """HF parity through torch.library: BigBird's given table (rand_attn), LSH's rotations and key epsilon,
    Longformer's global projections, each equal to attnkit.attention with the same pattern."""
    q, k, v = tensors
    table = torch.zeros(4, 2, 2, dtype=torch.int64)  # HF's eval-mode rand_attn: [heads, blocks - 2, r]
    table[:, 1] = torch.tensor([3, 0])
    out = torch.ops.attnkit.big_bird(q, k, v, 16, table=table)
    assert torch.equal(out, attnkit.attention(attnkit.BigBird.from_table(16, table.numpy()), q, k, v))
    assert not torch.equal(out, torch.ops.attnkit.big_bird(q, k, v, 16, 2))

    rotations = torch.randn(4, 16, 1, 4, generator=torch.Generator().manual_seed(3))  # [H, D, R, buckets / 2]
    out = torch.ops.attnkit.lsh(q, v, chunk=8, buckets=8, rotations=rotations, key_epsilon=1e-6, scale=1.0)
    pattern = attnkit.Lsh(chunk=8, buckets=8, rotations=rotations.numpy(), key_epsilon=1e-6)
    assert torch.equal(out, attnkit.attention(pattern, q, q, v, scale=1.0))
    factored = torch.ops.attnkit.lsh(q, v, chunk=8, bucket_factors=[2, 4], seed=1)
    assert torch.equal(factored, attnkit.attention(attnkit.Lsh(chunk=8, buckets=[2, 4], seed=1), q, q, v))

    qg, kg, vg = (x.flip(2).contiguous() for x in (q, k, v))
    out = torch.ops.attnkit.longformer(q, k, v, 4, 4, [0, 31], qg=qg, kg=kg, vg=vg)
    pattern = attnkit.Union(attnkit.SlidingWindow(4, 4), attnkit.Global([0, 31]))
    assert torch.equal(out, attnkit.attention(pattern, q, k, v, global_qkv=(qg, kg, vg)))
    assert not torch.equal(out, torch.ops.attnkit.longformer(q, k, v, 4, 4, [0, 31]))
    with pytest.raises((ValueError, RuntimeError), match="give all three"):
        torch.ops.attnkit.longformer(q, k, v, 4, 4, [0, 31], qg=qg)
