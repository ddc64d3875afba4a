"""attnkit.attention on NumPy arrays: every mask kind against a plain NumPy float64 softmax, every
kind against attnkit.reference, outputs, strides and bad input."""

import numpy as np
import pytest

import attnkit
from conftest import (assert_float_close, block_mask, dense_attention, dilated_mask, full_mask, global_mask, qkv,
                      window_mask)

HQ, LQ = 4, 67


def mask_cases():
    """(pattern, its dense mask [Hq, Lq, Lk]) with Lq = Lk = 67, Hq = 4."""
    local = np.eye(5, dtype=bool) | np.eye(5, k=1, dtype=bool)
    strided = np.zeros((5, 5), bool)
    strided[:, 0] = True
    strided[np.arange(5), np.arange(5)] = True
    window = window_mask(HQ, LQ, LQ, 5, 5)
    globals_ = global_mask(HQ, LQ, LQ, [0, 20])
    causal = full_mask(HQ, LQ, LQ, causal=True)
    return [
        (attnkit.Full(), full_mask(HQ, LQ, LQ)),
        (attnkit.Full(causal=True), causal),
        (attnkit.SlidingWindow(3, 7), window_mask(HQ, LQ, LQ, 3, 7)),
        (attnkit.SlidingWindow.causal(9), window_mask(HQ, LQ, LQ, 9, 0)),
        (attnkit.SlidingWindow.streaming(9, 4), window_mask(HQ, LQ, LQ, 9, 0, sinks=4)),
        (attnkit.SlidingWindow(3, 0, sinks=30), window_mask(HQ, LQ, LQ, 3, 0, sinks=30)),
        (attnkit.Dilated.symmetric(4, [1, 2, 3, 1]), dilated_mask(HQ, LQ, LQ, 4, 4, [1, 2, 3, 1])),
        (attnkit.Global([0, 20]), globals_),
        (attnkit.BlockSparse(16, [attnkit.BlockLayout.from_bitmap(local)]), block_mask(HQ, LQ, LQ, 16, [local])),
        (attnkit.BlockSparse(16, [attnkit.BlockLayout.from_bitmap(m) for m in (local, strided, local, strided)],
                             causal=True),
         block_mask(HQ, LQ, LQ, 16, [local, strided, local, strided], causal=True)),
        (attnkit.Union(attnkit.SlidingWindow.symmetric(5), attnkit.Global([0, 20])), window | globals_),
        (attnkit.Union(attnkit.Global([0, 20]), attnkit.SlidingWindow.symmetric(5)), window | globals_),
        (attnkit.Union(attnkit.Dilated.symmetric(4, [1, 2, 3, 1]), attnkit.Global([0, 20])),
         dilated_mask(HQ, LQ, LQ, 4, 4, [1, 2, 3, 1]) | globals_),
        (attnkit.Intersection(attnkit.SlidingWindow.symmetric(5), attnkit.Full(causal=True)), window & causal),
        (attnkit.Intersection(attnkit.Union(attnkit.SlidingWindow.symmetric(5), attnkit.Global([0, 20])),
                              attnkit.Full(causal=True)), (window | globals_) & causal),
        (attnkit.PerHead([attnkit.Full(causal=True), attnkit.SlidingWindow(2, 1), attnkit.Global([3]),
                          attnkit.BlockSparse(16, [attnkit.BlockLayout.from_bitmap(local)])]),
         np.stack([causal[0], window_mask(1, LQ, LQ, 2, 1)[0], global_mask(1, LQ, LQ, [3])[0],
                   block_mask(1, LQ, LQ, 16, [local])[0]])),
    ]


@pytest.mark.parametrize("pattern,mask", mask_cases(), ids=lambda x: repr(x) if not isinstance(x, np.ndarray) else "")
def test_mask_kinds_match_a_numpy_softmax(rng, pattern, mask):
    q, k, v = qkv(rng, hq=HQ, lq=LQ, lk=LQ)
    expected, expected_lse = dense_attention(q, k, v, mask)
    out, lse = attnkit.attention(pattern, q, k, v, lse=True)
    assert out.dtype == np.float32 and out.shape == (2, HQ, LQ, 8)
    assert_float_close(out, expected, v)
    np.testing.assert_allclose(lse, expected_lse, rtol=1e-5, atol=1e-5)
    out64, lse64 = attnkit.attention(pattern, *(x.astype(np.float64) for x in (q, k, v)), lse=True)
    assert out64.dtype == np.float64 and lse64.dtype == np.float64
    np.testing.assert_allclose(out64, expected, rtol=1e-12, atol=1e-13)
    assert attnkit.attended_keys(pattern, attnkit.AttentionShape(q_heads=HQ, q_len=LQ), 1, 30) == mask[1, 30].sum()


def non_mask_cases():
    return [
        attnkit.BigBird(16, 2, seed=3),
        attnkit.Linformer.gaussian(kp=16, n_max=80, heads=1, seed=5),
        attnkit.Lsh(chunk=8, rounds=2, buckets=8, seed=1),
        attnkit.KernelizedRpe(features=32, seed=2, algorithm=attnkit.RpeAlgorithm.direct,
                              bias=attnkit.RpeBias(4, np.linspace(-1, 1, 9))),
    ]


@pytest.mark.parametrize("pattern", non_mask_cases(), ids=repr)
def test_every_kind_matches_the_reference_in_float64(rng, pattern):
    shared_qk = isinstance(pattern, attnkit.Lsh)
    hk = 4 if shared_qk else 2
    q, k, v = qkv(rng, hq=4, hk=hk, lq=64, lk=64, dtype=np.float64)
    if shared_qk:
        k = q
    out, lse = attnkit.attention(pattern, q, k, v, lse=not isinstance(pattern, attnkit.KernelizedRpe)), None
    if isinstance(out, tuple):
        out, lse = out
    ref = attnkit.reference.attention(pattern, q, k, v)
    np.testing.assert_allclose(out, ref, rtol=1e-10, atol=1e-12)


def test_float32_kinds_against_the_reference(rng):
    q, k, v = qkv(rng, hq=4, hk=2, lq=130, lk=130)
    for pattern in (attnkit.BigBird(32, 1, seed=9), attnkit.Linformer.xavier_uniform(32, 130, 2, seed=4)):
        out = attnkit.attention(pattern, q, k, v)
        ref = attnkit.reference.attention(pattern, *(x.astype(np.float64) for x in (q, k, v)))
        assert_float_close(out, ref, v if not isinstance(pattern, attnkit.Linformer) else 4 * v)


def test_strided_views_are_read_in_place(rng):
    # [B, L, H, D] buffers seen as [B, H, L, D] through transpose: no copy, same result.
    b, lq, h, d = 2, 50, 4, 16
    q_blhd = rng.standard_normal((b, lq, h, d)).astype(np.float32)
    k_blhd = rng.standard_normal((b, lq, h, d)).astype(np.float32)
    v_blhd = rng.standard_normal((b, lq, h, d)).astype(np.float32)
    views = [x.transpose(0, 2, 1, 3) for x in (q_blhd, k_blhd, v_blhd)]
    out_blhd = np.zeros((b, lq, h, d), np.float32)
    out_view = out_blhd.transpose(0, 2, 1, 3)
    result = attnkit.attention(attnkit.SlidingWindow.symmetric(4), *views, out=out_view)
    assert result is out_view
    contiguous = attnkit.attention(attnkit.SlidingWindow.symmetric(4), *(np.ascontiguousarray(x) for x in views))
    np.testing.assert_array_equal(out_blhd.transpose(0, 2, 1, 3), contiguous)


def test_out_and_lse_are_written_in_place(rng):
    q, k, v = qkv(rng)
    out = np.full((2, 4, 67, 8), np.nan, np.float32)
    lse = np.full((2, 4, 67), np.nan, np.float32)
    result_out, result_lse = attnkit.attention(attnkit.Full(), q, k, v, out=out, lse=lse)
    assert result_out is out and result_lse is lse
    expected, expected_lse = dense_attention(q, k, v, full_mask(4, 67, 67))
    assert_float_close(out, expected, v)
    np.testing.assert_allclose(lse, expected_lse, rtol=1e-5)


def test_threads_and_scale(rng):
    q, k, v = qkv(rng, lq=300, lk=300)
    one = attnkit.attention(attnkit.Full(causal=True), q, k, v, threads=1, scale=0.3)
    two = attnkit.attention(attnkit.Full(causal=True), q, k, v, threads=2, scale=0.3)
    np.testing.assert_array_equal(one, two)  # SPEC.md section 0: bitwise across thread counts
    expected, _ = dense_attention(q, k, v, full_mask(4, 300, 300, causal=True), scale=0.3)
    assert_float_close(one, expected, v)


def test_key_lengths_pad_linformer(rng):
    q, k, v = qkv(rng, lq=40, lk=40, dtype=np.float64)
    linformer = attnkit.Linformer.gaussian(8, 64, 1, seed=1)
    out = attnkit.attention(linformer, q, k, v, key_lengths=[40, 25])
    ref = attnkit.reference.attention(linformer, q, k, v, key_lengths=[40, 25])
    np.testing.assert_allclose(out, ref, rtol=1e-10)
    with pytest.raises(ValueError, match="key_lengths"):
        attnkit.attention(attnkit.Full(), q, k, v, key_lengths=[40, 25])


@pytest.mark.parametrize(
    "change,message",
    [
        (lambda q, k, v, o: (q, k.astype(np.float64), v, o), "k.dtype = float64: must equal q.dtype = float32"),
        (lambda q, k, v, o: (q[0], k, v, o), "q.ndim = 3: must be 4"),
        (lambda q, k, v, o: (q, k[:, :, :, :5], v, o), "k.sizes\\[dim\\] = 5"),
        (lambda q, k, v, o: (q.astype(np.int64), k, v, o), "q.dtype = int64"),
        (lambda q, k, v, o: (q, k, v, o.astype(np.float64)), "out.dtype = float64"),
        (lambda q, k, v, o: (q, k, v, o[:, :, :5]), "out.sizes"),
        (lambda q, k, v, o: (q, k, v, "out"), "out = str: must be a NumPy array or a torch tensor"),
        (lambda q, k, v, o: (q.astype(">f4"), k, v, o), "byte order"),
    ],
)
def test_bad_input_is_a_value_error_and_nothing_is_written(rng, change, message):
    q, k, v = qkv(rng)
    out = np.full((2, 4, 67, 8), 7.0, np.float32)
    q2, k2, v2, out2 = change(q, k, v, out)
    with pytest.raises(ValueError, match=message):
        attnkit.attention(attnkit.Full(), q2, k2, v2, out=out2)
    assert np.all(out == 7.0)


def test_read_only_out_and_bad_lse_are_refused(rng):
    q, k, v = qkv(rng)
    out = np.zeros((2, 4, 67, 8), np.float32)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="out.writeable = False"):
        attnkit.attention(attnkit.Full(), q, k, v, out=out)
    with pytest.raises(ValueError, match="lse.dtype = float64: must be float32"):
        attnkit.attention(attnkit.Full(), q, k, v, lse=np.zeros((2, 4, 67)))
    with pytest.raises(ValueError, match="lse.ndim = 4"):
        attnkit.attention(attnkit.Full(), q, k, v, lse=np.zeros((2, 4, 67, 1), np.float32))
    with pytest.raises(ValueError, match="pattern = int"):
        attnkit.attention(3, q, k, v)
    with pytest.raises(ValueError, match="options.threads"):
        attnkit.attention(attnkit.Full(), q, k, v, threads=-1)


def test_empty_rows_give_zeros_and_minus_infinity(rng):
    q, k, v = qkv(rng, hq=2, hk=2, lq=4, lk=10)
    # Bottom-right causal with Lq < Lk: every row sees keys; a window of radius 0 to the right
    # of Lk sees none for rows past the end: use Global tokens beyond Lk instead.
    out, lse = attnkit.attention(attnkit.SlidingWindow(0, 0), q[:, :, :4], k[:, :, :2], v[:, :, :2], lse=True)
    assert np.all(out[:, :, 2:] == 0) and np.all(np.isneginf(lse[:, :, 2:]))
    assert not np.any(np.isnan(out))


def test_float16_numpy_calls(rng):
    q, k, v = qkv(rng, dtype=np.float16)
    out = attnkit.attention(attnkit.SlidingWindow.symmetric(6), q, k, v)
    assert out.dtype == np.float16
    expected, _ = dense_attention(q, k, v, window_mask(4, 67, 67, 6, 6))
    bound = 2e-5 * np.abs(v.astype(np.float64)).max() + (1e-4 + 2.0**-11) * np.abs(expected)
    assert np.all(np.abs(out.astype(np.float64) - expected) <= bound)
    widened = np.zeros((2, 4, 67, 8), np.float32)
    attnkit.attention(attnkit.SlidingWindow.symmetric(6), q, k, v, out=widened)
    assert_float_close(widened, expected, v)


def test_dispatch_targets(rng):
    targets = attnkit.dispatch.supported_simd_targets()
    assert attnkit.dispatch.SimdTarget.sse2 in targets
    assert attnkit.dispatch.simd_target() == targets[-1]
    q, k, v = qkv(rng)
    results = []
    try:
        for target in targets:
            attnkit.dispatch.set_simd_target(target)
            results.append(attnkit.dispatch.attention(attnkit.Full(causal=True), q, k, v))
    finally:
        attnkit.dispatch.set_simd_target(targets[-1])
    expected, _ = dense_attention(q, k, v, full_mask(4, 67, 67, causal=True))
    for result in results:
        assert_float_close(result, expected, v)
    with pytest.raises(ValueError, match="combinations run attnkit.attention"):
        attnkit.dispatch.attention(attnkit.Union(attnkit.SlidingWindow(1, 1), attnkit.Global([0])), q, k, v)


def test_lsh_key_epsilon_normalises_keys_as_hugging_face(rng):
    # HF/trax: keys x / sqrt(|x|^2 + D 1e-6), no further scale; n <= chunk is one chunk of full
    # shared-QK attention with -1e5 at the query's own key (SPEC.md section 7).
    x = 1e-3 * rng.standard_normal((1, 2, 40, 8))
    v = rng.standard_normal((1, 2, 40, 4))
    keys = x / np.sqrt((x**2).sum(-1, keepdims=True) + 8 * 1e-6)
    logits = np.einsum("bhid,bhjd->bhij", x, keys) - 1e5 * np.eye(40)
    weights = np.exp(logits - logits.max(-1, keepdims=True))
    expected = weights @ v / weights.sum(-1, keepdims=True)
    hf = attnkit.Lsh(key_epsilon=1e-6)
    np.testing.assert_allclose(attnkit.attention(hf, x, x, v, scale=1.0), expected, rtol=1e-10, atol=1e-12)
    unit = attnkit.attention(attnkit.Lsh(), x, x, v, scale=1.0)
    assert np.abs(unit - expected).max() > 1e-6
    with pytest.raises(ValueError, match="Lsh.key_epsilon = -1"):
        attnkit.attention(attnkit.Lsh(key_epsilon=-1.0), x, x, v)


def test_big_bird_from_a_given_table_counts_repeated_blocks_as_hugging_face(rng):
    # HF's rand_attn [heads, blocks - 2, r]; head 1 holds HF's eval-mode table (all zeros): HF gathers
    # block 0 once as a global block and r more times from the table, so it enters the softmax 1 + r times.
    block, blocks, heads = 8, 6, 2
    table = np.array([[[4, 2], [5, 0], [1, 5], [1, 2]], np.zeros((4, 2), int)])
    bird = attnkit.BigBird.from_table(block, table)
    assert bird.has_given_table and bird.random_blocks == 2 and bird.repeats_blocks
    counts = np.zeros((heads, blocks, blocks))
    counts[:, [0, blocks - 1], :] = 1
    for h in range(heads):
        for p in range(1, blocks - 1):
            counts[h, p, sorted({0, blocks - 1, p - 1, p, p + 1})] = 1  # window and global blocks once
            for entry in table[h, p - 1]:
                counts[h, p, entry] += 1  # every table entry once more
    mask = counts.repeat(block, 1).repeat(block, 2)
    q, k, v = qkv(rng, hq=heads, hk=heads, lq=48, lk=48, dtype=np.float64)
    expected, expected_lse = dense_attention(q, k, v, mask)
    out, lse = attnkit.attention(bird, q, k, v, lse=True)
    np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(lse, expected_lse, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(attnkit.reference.attention(bird, q, k, v), expected, rtol=1e-12, atol=1e-13)
    with pytest.raises(ValueError, match="Union: operand"):
        attnkit.attention(attnkit.Union(bird, attnkit.Global([0])), q, k, v)
    with pytest.raises(ValueError, match="blocks of the call = 7"):
        attnkit.attention(bird, *qkv(rng, hq=heads, hk=heads, lq=56, lk=56))


def test_outputs_overlapping_inputs_are_refused(rng):
    q, k, v = qkv(rng, hq=2, hk=2, lq=16, lk=16, d=8, dv=8)
    kept = v.copy()
    with pytest.raises(ValueError, match="out must not overlap v"):
        attnkit.attention(attnkit.Full(), q, k, v, out=v)
    with pytest.raises(ValueError, match="out must not overlap q"):
        attnkit.attention(attnkit.Full(), q, k, v, out=q[:, :, :, :])
    np.testing.assert_array_equal(v, kept)
    lse = np.zeros((2, 2, 16), np.float32)
    out = np.zeros((2, 2, 16, 8), np.float32)
    with pytest.raises(ValueError, match="lse must not overlap out"):
        attnkit.attention(attnkit.Full(), q, k, v, out=out, lse=out[:, :, :, 0])
    attnkit.attention(attnkit.Full(), q, k, v, out=out, lse=lse)  # separate buffers: accepted


def test_a_call_takes_numpy_arrays_or_torch_tensors_not_both(rng):
    torch = pytest.importorskip("torch")
    q, k, v = qkv(rng)
    with pytest.raises(ValueError, match="k = a NumPy array: must be a torch tensor like q"):
        attnkit.attention(attnkit.Full(), torch.from_numpy(q), k, v)
    with pytest.raises(ValueError, match="out = a torch tensor: must be a NumPy array like q"):
        attnkit.attention(attnkit.Full(), q, k, v, out=torch.zeros(2, 4, 67, 8))


def test_global_projections_give_global_rows_their_own_q_k_v(rng):
    q, k, v = qkv(rng, dtype=np.float64)
    qg, kg, vg = qkv(rng, dtype=np.float64)
    tokens = [0, 20, 66]
    for pattern, local_mask in [
        (attnkit.Union(attnkit.SlidingWindow(4, 3), attnkit.Global(tokens)),
         window_mask(4, 67, 67, 4, 3) | global_mask(4, 67, 67, tokens)),
        (attnkit.Global(tokens), global_mask(4, 67, 67, tokens)),
    ]:
        expected, expected_lse = dense_attention(q, k, v, local_mask)
        global_rows, global_lse = dense_attention(qg, kg, vg, full_mask(4, 67, 67))
        expected[:, :, tokens] = global_rows[:, :, tokens]
        expected_lse[:, :, tokens] = global_lse[:, :, tokens]
        out, lse = attnkit.attention(pattern, q, k, v, lse=True, global_qkv=(qg, kg, vg))
        np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(lse, expected_lse, rtol=1e-12, atol=1e-12)
    out32 = attnkit.attention(attnkit.Union(attnkit.SlidingWindow(4, 3), attnkit.Global(tokens)),
                              *(x.astype(np.float32) for x in (q, k, v)),
                              global_qkv=tuple(x.astype(np.float32) for x in (qg, kg, vg)))
    assert out32.dtype == np.float32
    with pytest.raises(ValueError, match="global_qkv = given: takes Longformer's patterns"):
        attnkit.attention(attnkit.SlidingWindow(4, 3), q, k, v, global_qkv=(qg, kg, vg))
    with pytest.raises(ValueError, match="global_qkv\\[1\\].shape"):
        attnkit.attention(attnkit.Global(tokens), q, k, v, global_qkv=(qg, kg[:, :, :5], vg))
    with pytest.raises(ValueError, match="len\\(global_qkv\\) = 2"):
        attnkit.attention(attnkit.Global(tokens), q, k, v, global_qkv=(qg, kg))


def test_sinks_stay_causal_and_need_a_causal_window(rng):
    q, k, v = qkv(rng, hq=HQ, lq=6, lk=6)
    out = attnkit.attention(attnkit.SlidingWindow.streaming(1, 4), q, k, v)
    # Row 0 sits below the sink count and sees key 0 alone: its output is v_0.
    np.testing.assert_array_equal(out[:, :, 0], v[:, np.arange(HQ) // 2, 0])
    assert attnkit.SlidingWindow(2, 0, sinks=3).sinks == 3
    assert repr(attnkit.SlidingWindow.streaming(8, 4)) == "SlidingWindow(left=8, right=0, sinks=4)"
    with pytest.raises(ValueError, match="SlidingWindow::with_sinks: right = 1"):
        attnkit.SlidingWindow(2, 1, sinks=3)


def get_slopes(n):
    """ALiBi slopes as Press et al.'s reference code computes them (written here from the paper's description)."""
    def power_of_two(m):
        start = 2 ** (-8 / m)
        return [start ** (h + 1) for h in range(m)]
    below = 2 ** int(np.floor(np.log2(n)))
    return power_of_two(below) + power_of_two(2 * below)[0::2][:n - below]


def test_alibi_slopes_follow_press(rng):
    for heads in (1, 4, 8, 12, 20):
        np.testing.assert_allclose(attnkit.alibi_slopes(heads), get_slopes(heads), rtol=1e-14)


MODIFIED = [
    (attnkit.Full(causal=True), full_mask(HQ, 67, 90, causal=True)),
    (attnkit.SlidingWindow(6, 3), window_mask(HQ, 67, 90, 6, 3)),
    (attnkit.SlidingWindow.streaming(9, 4), window_mask(HQ, 67, 90, 9, 0, sinks=4)),
    (attnkit.Union(attnkit.SlidingWindow.symmetric(5), attnkit.Global([0, 20])),
     window_mask(HQ, 67, 90, 5, 5) | global_mask(HQ, 67, 90, [0, 20])),
]


@pytest.mark.parametrize("pattern,mask", MODIFIED, ids=lambda x: repr(x) if not isinstance(x, np.ndarray) else "")
@pytest.mark.parametrize("softcap,alibi", [(4.0, False), (0.0, True), (2.5, True)])
def test_softcap_and_alibi_match_a_numpy_softmax(rng, pattern, mask, softcap, alibi):
    q, k, v = qkv(rng, hq=HQ, lq=67, lk=90)
    q = 3 * q  # logits beyond the cap
    slopes = attnkit.alibi_slopes(HQ) if alibi else None
    ref, ref_lse = dense_attention(q, k, v, mask, softcap=softcap, alibi_slopes=slopes)
    out, lse = attnkit.attention(pattern, q, k, v, lse=True, softcap=softcap, alibi_slopes=slopes)
    assert_float_close(out, ref, v)
    np.testing.assert_allclose(lse, ref_lse, rtol=2e-5, atol=2e-5)
    ref64, _ = attnkit.reference.attention(pattern, q.astype(np.float64), k.astype(np.float64),
                                           v.astype(np.float64), lse=True, softcap=softcap, alibi_slopes=slopes)
    np.testing.assert_allclose(ref64, ref, rtol=1e-10, atol=1e-12)
    if not isinstance(pattern, attnkit.Union):
        dispatched = attnkit.dispatch.attention(pattern, q, k, v, softcap=softcap, alibi_slopes=slopes)
        assert_float_close(dispatched, ref, v)


def test_score_modifier_errors(rng):
    q, k, v = qkv(rng, hq=HQ)
    with pytest.raises(ValueError, match="options.softcap = -1"):
        attnkit.attention(attnkit.Full(), q, k, v, softcap=-1.0)
    with pytest.raises(ValueError, match="options.alibi_slopes.size\\(\\) = 3"):
        attnkit.attention(attnkit.Full(), q, k, v, alibi_slopes=[0.5, 0.25, 0.125])
    with pytest.raises(ValueError, match="alibi_slopes = str"):
        attnkit.attention(attnkit.Full(), q, k, v, alibi_slopes="slopes")


def test_packed_sequences_match_each_sequence_alone(rng):
    """query_offsets and key_offsets on tensors (flash-attn's varlen layout): each sequence's rows against a plain
    NumPy softmax over its own keys (causal bottom-right when its counts differ; no keys: zeros), the same bits as
    its own call, through attnkit.attention (a registered kind and a combination) and attnkit.dispatch."""
    counts = [(37, 37), (20, 50), (9, 3), (4, 0), (0, 6), (70, 70)]
    query_offsets = np.cumsum([0] + [rows for rows, _ in counts]).astype(np.int64)
    key_offsets = np.cumsum([0] + [keys for _, keys in counts]).astype(np.int64)
    q = rng.standard_normal((1, HQ, int(query_offsets[-1]), 16)).astype(np.float32)
    k = rng.standard_normal((1, 2, int(key_offsets[-1]), 16)).astype(np.float32)
    v = rng.standard_normal((1, 2, int(key_offsets[-1]), 8)).astype(np.float32)
    causal = attnkit.Full(causal=True)
    window = attnkit.Intersection(attnkit.SlidingWindow.symmetric(5), attnkit.Full(causal=True))
    # The window's dense mask is written for square sequences (SPEC.md section 2); causal for any counts.
    for pattern, mask, square_only in ((causal, lambda n, m: full_mask(HQ, n, m, causal=True), False),
                                       (window, lambda n, m: window_mask(HQ, n, m, 5, 5) & full_mask(HQ, n, m, True),
                                        True)):
        out, lse = attnkit.attention(pattern, q, k, v, lse=True, query_offsets=query_offsets, key_offsets=key_offsets)
        for b, (rows, keys) in enumerate(counts):
            qs = q[:, :, query_offsets[b]:query_offsets[b + 1]]
            ks, vs = (x[:, :, key_offsets[b]:key_offsets[b + 1]] for x in (k, v))
            rows_out = out[:, :, query_offsets[b]:query_offsets[b + 1]]
            if rows == 0:
                continue
            np.testing.assert_array_equal(rows_out, attnkit.attention(pattern, qs, ks, vs))
            if keys == 0:
                assert not rows_out.any() and np.all(lse[:, :, query_offsets[b]:query_offsets[b + 1]] == -np.inf)
                continue
            if square_only and rows != keys:
                continue
            ref, ref_lse = dense_attention(qs, ks, vs, mask(rows, keys))
            assert_float_close(rows_out, ref, v)
            np.testing.assert_allclose(lse[:, :, query_offsets[b]:query_offsets[b + 1]], ref_lse, rtol=1e-5, atol=2e-5)
    dispatched = attnkit.dispatch.attention(causal, q, k, v, query_offsets=query_offsets, key_offsets=key_offsets)
    np.testing.assert_array_equal(dispatched, attnkit.attention(causal, q, k, v, query_offsets=query_offsets,
                                                                key_offsets=key_offsets))
    with pytest.raises(ValueError, match="key_offsets = given: packed sequences on tensors take query_offsets and"):
        attnkit.attention(causal, q, k, v, key_offsets=key_offsets)
    with pytest.raises(ValueError, match="key_offsets\\[6\\] = 165: must equal k.sizes\\[seq\\] = 166"):
        short = key_offsets.copy()
        short[6] -= 1
        attnkit.attention(causal, q, k, v, query_offsets=query_offsets, key_offsets=short)
    with pytest.raises(ValueError, match="pattern = Lsh: packed sequences take mask kinds"):
        attnkit.attention(attnkit.Lsh(), q, k, v, query_offsets=query_offsets, key_offsets=key_offsets)
