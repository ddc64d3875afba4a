"""The pattern classes: parameters, helpers, costs and errors, against values derived here."""

import numpy as np
import pytest

import attnkit


def test_registered_kinds():
    assert attnkit.kinds == ("Full", "SlidingWindow", "Dilated", "Global", "BlockSparse", "BigBird", "Linformer",
                             "Lsh", "KernelizedRpe")
    for name in attnkit.kinds:
        assert isinstance(getattr(attnkit, name), type)


def test_window_parameters():
    assert (attnkit.SlidingWindow.symmetric(4).left, attnkit.SlidingWindow.symmetric(4).right) == (4, 4)
    assert (attnkit.SlidingWindow.causal(4).left, attnkit.SlidingWindow.causal(4).right) == (4, 0)
    hf = attnkit.SlidingWindow.from_hf_attention_window(512)  # HF Longformer: radius 256
    assert (hf.left, hf.right) == (256, 256)
    assert attnkit.Dilated(2, 3, [1, 2]).dilations == [1, 2]
    assert attnkit.Global([0, 7]).tokens == [0, 7]
    assert attnkit.Full(causal=True).causal
    with pytest.raises(ValueError, match="SlidingWindow"):
        attnkit.SlidingWindow(-1, 2)
    with pytest.raises(ValueError, match="Global"):
        attnkit.Global([5, 2])
    with pytest.raises(ValueError, match="must be a sequence of integers"):
        attnkit.Global("x")


def test_costs_count_pairs():
    shape = attnkit.AttentionShape(batch=2, q_heads=3, q_len=100, head_dim=16)
    assert shape.kv_len == 100 and shape.kv_heads == 3 and shape.value_dim == 16
    full = attnkit.Full().cost(shape)
    assert full.attended_pairs == 2 * 3 * 100 * 100 and full.density == 1
    assert full.flops == 2 * full.attended_pairs * (16 + 16)  # SPEC.md section 1
    causal = attnkit.cost(attnkit.Full(causal=True), shape)
    assert causal.attended_pairs == 2 * 3 * 100 * 101 / 2
    window = attnkit.SlidingWindow(2, 1).cost(shape)
    rows = sum(min(i + 1, 99) - max(i - 2, 0) + 1 for i in range(100))
    assert window.attended_pairs == 2 * 3 * rows
    longformer = attnkit.Union(attnkit.SlidingWindow(2, 1), attnkit.Global([0]))
    assert attnkit.attended_keys(longformer, shape, 0, 0) == 100
    assert attnkit.attended_keys(longformer, shape, 0, 50) == 4 + 1
    with pytest.raises(ValueError, match="attended_keys: row = 100"):
        attnkit.attended_keys(longformer, shape, 0, 100)
    with pytest.raises(ValueError, match="must be a mask kind"):
        attnkit.attended_keys(attnkit.Lsh(), shape, 0, 0)


def test_ascii_view():
    picture = attnkit.ascii_view(attnkit.Full(causal=True), attnkit.AttentionShape(q_len=3))
    assert picture == "#..\n##.\n###\n"


def test_block_layouts():
    bits = np.array([[1, 0], [1, 1]])
    layout = attnkit.BlockLayout.from_bitmap(bits)
    assert (layout.query_blocks, layout.key_blocks, layout.nonzeros) == (2, 2, 3)
    assert layout.row(1) == [0, 1]
    assert layout == attnkit.BlockLayout.from_rows(2, [[0], [0, 1]])
    sparse = attnkit.BlockSparse.blockbert(8, [[1, 0], [0, 1]])
    assert sparse.block_size == 8 and len(sparse.layouts) == 2 and not sparse.causal
    assert attnkit.BlockSparse.local(8, 4, causal=True).causal
    with pytest.raises(ValueError, match="permutation"):
        attnkit.BlockSparse.blockbert(8, [[0, 0]])


def test_big_bird_table():
    bird = attnkit.BigBird(block_size=16, random_blocks=2, seed=5)
    table = bird.random_table(3, 8)
    assert table.shape == (3, 8, 2)
    # Rows of the global first and last blocks draw nothing; others draw r blocks outside their window.
    assert np.all(table[:, 0] == -1) and np.all(table[:, 7] == -1)
    for h in range(3):
        for p in range(1, 7):
            assert len(set(table[h, p])) == 2
            assert all(1 <= c <= 6 and abs(c - p) > 1 for c in table[h, p])
    np.testing.assert_array_equal(table, attnkit.BigBird(16, 2, seed=5).random_table(3, 8))


def test_linformer_projection(rng):
    e = rng.standard_normal((1, 4, 10)).astype(np.float32)
    f = rng.standard_normal((1, 4, 10)).astype(np.float32)
    linformer = attnkit.Linformer(4, 10, e, f)
    assert linformer.kp == 4 and linformer.n_max == 10 and not linformer.shares_key_value_projection
    k = rng.standard_normal((2, 3, 10, 5))
    v = rng.standard_normal((2, 3, 10, 6))
    keys, values = linformer.project(k, v)
    np.testing.assert_allclose(keys, np.einsum("pn,bhnd->bhpd", e[0].astype(np.float64), k), rtol=1e-12)
    np.testing.assert_allclose(values, np.einsum("pn,bhnd->bhpd", f[0].astype(np.float64), v), rtol=1e-12)
    assert attnkit.Linformer.gaussian_projection(4, 10, 2, seed=1).shape == (2, 4, 10)
    with pytest.raises(ValueError, match="Linformer"):
        attnkit.Linformer(4, 10, np.zeros(7, np.float32))


def test_lsh_hash_and_rotation(rng):
    lsh = attnkit.Lsh(chunk=4, rounds=3, buckets=8, seed=2)
    x = rng.standard_normal((2, 2, 32, 6)).astype(np.float32)
    ids = lsh.hash(x)
    assert ids.shape == (2, 2, 3, 32) and ids.dtype == np.int32
    assert ids.min() >= 0 and ids.max() < 8
    rotation = lsh.rotation(0, 6, 32)
    assert rotation.shape == (6, 3, 4)
    # SPEC.md step 1: the bucket is the argmax over [xR, -xR] of the round's rotation.
    projected = np.einsum("d,drc->rc", x[0, 0, 5].astype(np.float64), rotation.astype(np.float64))
    assert list(np.argmax(np.concatenate([projected, -projected], axis=1), axis=1)) == list(ids[0, 0, :, 5])
    assert lsh.bucket_factors(32) == [8]
    assert attnkit.Lsh(buckets=[4, 8]).bucket_factors(64) == [4, 8]
    with pytest.raises(ValueError, match="Lsh.chunk"):
        attnkit.attention(attnkit.Lsh(chunk=0), x, x, x)


def test_kernelized_rpe_parameters():
    rpe = attnkit.KernelizedRpe(features=8, map=attnkit.FeatureMap.trigonometric, orthogonal=True, seed=3,
                                bias=attnkit.RpeBias(2, [0.0, 0.1, 0.2, 0.1, 0.0]))
    w = rpe.feature_matrix(0, 8)
    assert w.shape == (8, 8)
    np.testing.assert_allclose(w @ w.T / np.outer(np.linalg.norm(w, axis=1), np.linalg.norm(w, axis=1)), np.eye(8),
                               atol=1e-10)  # ORF rows are orthogonal
    assert rpe.bias.max_distance == 2 and rpe.bias.heads == 1
    with pytest.raises(ValueError, match="RpeBias values.size"):
        attnkit.RpeBias(2, [0.0, 1.0])


def test_combinations_that_are_not_compiled_are_refused():
    with pytest.raises(ValueError, match="Union: \\(first, second\\) = \\(Full, Lsh\\)"):
        attnkit.Union(attnkit.Full(), attnkit.Lsh())
    with pytest.raises(ValueError, match="Intersection"):
        attnkit.Intersection(attnkit.Dilated(1, 1, [2]), attnkit.Full(causal=True))
    with pytest.raises(ValueError, match="PerHead: patterns\\[1\\] = Dilated"):
        attnkit.PerHead([attnkit.Full(), attnkit.Dilated(1, 1, [2])])
    union = attnkit.Union(attnkit.Global([0]), attnkit.SlidingWindow(1, 1))
    assert isinstance(union.first, attnkit.Global) and isinstance(union.second, attnkit.SlidingWindow)


def test_schedule():
    sparse = attnkit.BlockSparse.local(1024, 8, causal=True)
    schedule = attnkit.Schedule.masformer(24, 4, sparse)
    assert len(schedule) == 24 and schedule.layers == 24
    assert isinstance(schedule.at(0), attnkit.Full) and schedule.at(0).causal
    assert isinstance(schedule[23], attnkit.BlockSparse)
    cost = schedule.cost(attnkit.AttentionShape(q_len=8192, head_dim=64))
    assert len(cost.layers) == 24
    assert cost.pairs_fraction() == pytest.approx(0.271, abs=1e-3)  # README: 27.1%
    with pytest.raises(ValueError, match="Schedule::at: layer = 24"):
        schedule.at(24)
    with pytest.raises(ValueError, match="registered kind"):
        attnkit.Schedule([attnkit.Union(attnkit.SlidingWindow(1, 1), attnkit.Global([0]))])
