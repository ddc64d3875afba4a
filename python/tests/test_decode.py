"""Decode over KV caches from Python: contiguous and paged caches of float32, bfloat16, float16 and
8-bit blocks, append, attention at each sequence's last positions, against the float64 reference
and a NumPy softmax."""

import numpy as np
import pytest

import attnkit
from conftest import assert_float_close

torch = pytest.importorskip("torch")

B, HK, HQ, D, DV, CAPACITY = 3, 2, 4, 64, 32, 96


def numpy_decode(q, keys, values, lengths, causal_window=None):
    """Causal attention of the last Lq positions of each sequence over its lengths[b] keys (float64).
    keys/values: [B, Hk, capacity, D] floats (the cache's values)."""
    b, hq, lq, d = q.shape
    group = hq // keys.shape[1]
    out = np.zeros((b, hq, lq, values.shape[3]))
    for s in range(b):
        n = lengths[s]
        for h in range(hq):
            for i in range(lq):
                position = n - lq + i
                if position < 0:
                    continue
                first = 0 if causal_window is None else max(0, position - causal_window)
                k = keys[s, h // group, first:position + 1]
                logits = k @ q[s, h, i] / np.sqrt(d)
                w = np.exp(logits - logits.max())
                out[s, h, i] = w @ values[s, h // group, first:position + 1] / w.sum()
    return out


@pytest.fixture
def rows(rng):
    k = rng.standard_normal((B, HK, 80, D)).astype(np.float32)
    v = rng.standard_normal((B, HK, 80, DV)).astype(np.float32)
    return k, v


def float_cache(lengths):
    """An empty float32 contiguous cache over zeros: (k, v, lengths, cache), viewed in place."""
    k = np.zeros((B, HK, CAPACITY, D), np.float32)
    v = np.zeros((B, HK, CAPACITY, DV), np.float32)
    lengths = np.array(lengths, np.int64)
    return k, v, lengths, attnkit.KvCache(k, v, lengths)


def test_append_then_attend_on_a_float_cache(rng, rows):
    k_rows, v_rows = rows
    k, v, lengths, cache = float_cache([0, 0, 0])
    attnkit.append(cache, k_rows, v_rows)
    np.testing.assert_array_equal(lengths, [80, 80, 80])  # advanced in place
    np.testing.assert_array_equal(k[:, :, :80], k_rows)   # written in place, no copy
    lengths[1] = 41  # ragged: sequence 1 holds 41 tokens
    q = rng.standard_normal((B, HQ, 3, D)).astype(np.float32)
    out, lse = attnkit.attention(attnkit.Full(causal=True), q, cache, lse=True)
    assert out.shape == (B, HQ, 3, DV) and lse.shape == (B, HQ, 3) and lse.dtype == np.float32
    expected = numpy_decode(q, k.astype(np.float64), v.astype(np.float64), lengths)
    assert_float_close(out, expected, v_rows)
    reference, reference_lse = attnkit.reference.decode(attnkit.Full(causal=True), q, cache, lse=True)
    np.testing.assert_allclose(reference, expected, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(lse, reference_lse, rtol=1e-5)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, "q8_0"])
def test_paged_caches_with_shuffled_and_shared_pages(rng, rows, dtype):
    k_rows, v_rows = (torch.from_numpy(x) for x in rows)
    page, pages = 16, 20
    if dtype == "q8_0":
        k_pages = torch.zeros(pages, HK, page, D // 32, 34, dtype=torch.uint8)
        v_pages = torch.zeros(pages, HK, page, DV // 32, 34, dtype=torch.uint8)
    else:
        k_pages = torch.zeros(pages, HK, page, D, dtype=dtype)
        v_pages = torch.zeros(pages, HK, page, DV, dtype=dtype)
    order = rng.permutation(pages).astype(np.int32)
    table = torch.from_numpy(order[:15].reshape(3, 5).copy())
    lengths = torch.zeros(3, dtype=torch.int64)
    cache = attnkit.PagedKvCache(k_pages, v_pages, table, lengths)
    attnkit.append(cache, k_rows[:, :, :70], v_rows[:, :, :70])
    # Sequence 2 shares sequence 0's first two pages (a common prefix of 32 tokens).
    table[2, :2] = table[0, :2]
    lengths[2] = 32
    q = torch.from_numpy(rng.standard_normal((B, HQ, 2, D)).astype(np.float32))
    for pattern in (attnkit.Full(causal=True), attnkit.Union(attnkit.SlidingWindow.causal(8), attnkit.Global([0, 1])),
                    attnkit.SlidingWindow.causal(8)):
        out = attnkit.attention(pattern, q, cache, out=torch.empty(B, HQ, 2, DV))
        reference = attnkit.reference.decode(pattern, q, cache)
        assert_float_close(out.numpy(), reference, v_rows.numpy())
    values = attnkit.reference.decode(attnkit.Full(causal=True), q, cache)
    shared = attnkit.reference.decode(attnkit.Full(causal=True), q[2:], attnkit.PagedKvCache(
        k_pages, v_pages, table[:1], torch.tensor([32])))
    np.testing.assert_array_equal(values[2], shared[0])  # sequence 2 reads sequence 0's pages


def test_half_queries_and_q8_cache_quantize(rng, rows):
    k_rows, v_rows = rows
    k = np.zeros((B, HK, CAPACITY, D // 32, 34), np.uint8)
    v = np.zeros((B, HK, CAPACITY, DV // 32, 34), np.uint8)
    cache = attnkit.KvCache(k, v, np.zeros(B, np.int64))
    attnkit.append(cache, k_rows, v_rows)
    # 8-bit blocks: 32 int8 values and a float16 scale amax / 127 per block (llama.cpp's Q8_0).
    block = k[0, 0, 0, 0]
    scale = block[:2].view(np.float16)[0]
    values = block[2:].view(np.int8)
    np.testing.assert_allclose(values * np.float64(scale), k_rows[0, 0, 0, :32], atol=float(scale) * 0.6)  # d/2, plus 127 d 2^-11 from the float16 scale
    q = torch.from_numpy(rng.standard_normal((B, HQ, 1, D)).astype(np.float32)).half()
    out = attnkit.attention(attnkit.Full(causal=True), q, cache)
    assert out.dtype == torch.float16
    reference = attnkit.reference.decode(attnkit.Full(causal=True), q, cache)
    bound = 2e-5 * np.abs(v_rows).max() + (1e-4 + 2.0**-11) * np.abs(reference)
    assert np.all(np.abs(out.double().numpy() - reference) <= bound)


def test_decode_errors_write_nothing(rng, rows):
    k_rows, v_rows = rows
    k = np.zeros((B, HK, 64, D), np.float32)
    v = np.zeros((B, HK, 64, DV), np.float32)
    lengths = np.zeros(B, np.int64)
    cache = attnkit.KvCache(k, v, lengths)
    with pytest.raises(ValueError, match="capacity|full"):
        attnkit.append(cache, k_rows, v_rows)  # 80 rows into 64 slots
    assert np.all(lengths == 0) and np.all(k == 0)
    attnkit.append(cache, k_rows[:, :, :10], v_rows[:, :, :10])
    q = rng.standard_normal((B, HQ, 1, D)).astype(np.float32)
    out = np.full((B, HQ, 1, DV), 5.0, np.float32)
    with pytest.raises(ValueError, match="v = given"):
        attnkit.attention(attnkit.Full(), q, cache, v, out=out)
    with pytest.raises(ValueError, match="pattern = Lsh: this kind cannot attend over a KV cache"):
        attnkit.attention(attnkit.Lsh(), q, cache, out=out)
    with pytest.raises(ValueError, match="q.dtype = float64"):
        attnkit.attention(attnkit.Full(), q.astype(np.float64), cache)
    assert np.all(out == 5.0)
    with pytest.raises(ValueError, match="lengths.dtype = int32"):
        attnkit.KvCache(k, v, np.zeros(B, np.int32))
    with pytest.raises(ValueError, match="shape\\[4\\] = 32"):
        attnkit.KvCache(np.zeros((B, HK, 8, 2, 32), np.uint8), np.zeros((B, HK, 8, 2, 32), np.uint8), lengths)
    table = np.array([[0], [1], [99]], np.int32)
    paged = attnkit.PagedKvCache(np.zeros((4, HK, 16, D), np.float32), np.zeros((4, HK, 16, DV), np.float32), table,
                                 np.array([3, 3, 3], np.int64))
    with pytest.raises(ValueError, match="block_table"):
        attnkit.attention(attnkit.Full(), q, paged, out=out)
    assert np.all(out == 5.0)


@pytest.mark.parametrize("dtype", ["float16", "q8_0"])
def test_softcap_alibi_and_sinks_over_a_cache(rng, rows, dtype):
    """attnkit.attention over a cache with the score modifiers against the float64 reference over the same cache."""
    k_rows, v_rows = rows
    if dtype == "q8_0":
        k = np.zeros((B, HK, CAPACITY, D // 32, 34), np.uint8)
        v = np.zeros((B, HK, CAPACITY, DV // 32, 34), np.uint8)
    else:
        k = np.zeros((B, HK, CAPACITY, D), np.float16)
        v = np.zeros((B, HK, CAPACITY, DV), np.float16)
    cache = attnkit.KvCache(k, v, np.zeros(B, np.int64))
    attnkit.append(cache, k_rows, v_rows)
    q = rng.standard_normal((B, HQ, 3, D)).astype(np.float32)
    for pattern in (attnkit.Full(causal=True), attnkit.SlidingWindow.streaming(20, 4)):
        options = dict(softcap=3.0, alibi_slopes=attnkit.alibi_slopes(HQ))
        out = attnkit.attention(pattern, q, cache, **options)
        ref = attnkit.reference.decode(pattern, q, cache, **options)
        assert_float_close(out, ref, v_rows)


def test_ragged_append_writes_each_sequences_count(rng, rows):
    k_rows, v_rows = rows
    k, v, lengths, cache = float_cache([10, 0, 5])
    attnkit.append(cache, k_rows[:, :, :4], v_rows[:, :, :4], counts=[4, 1, 0])
    np.testing.assert_array_equal(lengths, [14, 1, 5])
    np.testing.assert_array_equal(k[0, :, 10:14], k_rows[0, :, :4])
    np.testing.assert_array_equal(k[1, :, 0:1], k_rows[1, :, :1])
    assert not np.any(k[1, :, 1:]) and not np.any(k[2])
    with pytest.raises(ValueError, match="counts\\[1\\] = 5"):
        attnkit.append(cache, k_rows[:, :, :4], v_rows[:, :, :4], counts=[0, 5, 0])
    np.testing.assert_array_equal(lengths, [14, 1, 5])


def test_quantized_query_mode_over_an_8bit_cache(rng, rows):
    """The 8-bit query mode against the reference that quantizes q the same way; it differs from the exact
    mode by the query's rounding, and any other cache (or a call on tensors) refuses it."""
    k_rows, v_rows = rows
    k = np.zeros((B, HK, CAPACITY, D // 32, 34), np.uint8)
    v = np.zeros((B, HK, CAPACITY, DV // 32, 34), np.uint8)
    cache = attnkit.KvCache(k, v, np.zeros(B, np.int64))
    attnkit.append(cache, k_rows, v_rows)
    q = rng.standard_normal((B, HQ, 2, D)).astype(np.float32)
    pattern = attnkit.Full(causal=True)
    out = attnkit.attention(pattern, q, cache, quantized_query=True)
    ref = attnkit.reference.decode(pattern, q, cache, quantized_query=True)
    exact = attnkit.reference.decode(pattern, q, cache)
    assert_float_close(out, ref, v_rows)
    assert not np.array_equal(ref, exact)
    # The query's rounding: at most half a step (amax / 254) per value, so the outputs stay close.
    assert np.abs(ref - exact).max() < 0.05 * np.abs(v_rows).max()
    _, _, _, floats = float_cache([5, 5, 5])
    with pytest.raises(ValueError, match="options.quantized_query = true: needs a cache of q8_0_block"):
        attnkit.attention(pattern, q, floats, quantized_query=True)
    with pytest.raises(ValueError, match="quantized_query = True"):
        attnkit.attention(pattern, q, q, q, quantized_query=True)


def test_packed_rows_prefill_chunk_beside_decodes(rng, rows):
    """query_offsets: a 70-row prompt chunk (the prefill schedule), a one-row decode and an empty entry in one
    call, against the reference over the same packed rows and against each sequence's own call."""
    k_rows, v_rows = rows
    _, _, lengths, cache = float_cache([0, 0, 0])
    attnkit.append(cache, k_rows, v_rows)
    offsets = np.array([0, 70, 71, 71], np.int64)
    q = rng.standard_normal((1, HQ, 71, D)).astype(np.float32)
    pattern = attnkit.SlidingWindow.streaming(30, 4)
    out, lse = attnkit.attention(pattern, q, cache, lse=True, query_offsets=offsets)
    ref, ref_lse = attnkit.reference.decode(pattern, q, cache, lse=True, query_offsets=offsets)
    assert_float_close(out, ref, v_rows)
    np.testing.assert_allclose(lse, ref_lse, rtol=1e-5, atol=2e-5)
    whole = attnkit.attention(pattern, np.repeat(q[:, :, :70], B, axis=0), cache)
    np.testing.assert_array_equal(out[0, :, :70], whole[0])
    with pytest.raises(ValueError, match="query_offsets\\[3\\] = 70: must equal q.sizes\\[seq\\] = 71"):
        attnkit.attention(pattern, q, cache, query_offsets=np.array([0, 70, 70, 70], np.int64))
