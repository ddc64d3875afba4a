"""attnkit.attention on torch tensors: every element type, views without copies, out= in place,
the GIL released during a call."""

import threading
import time

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import attnkit  # noqa: E402
from conftest import assert_float_close, dense_attention, full_mask, global_mask, qkv, window_mask  # noqa: E402


def as_torch(rng, dtype, **shape):
    return [torch.from_numpy(x).to(dtype) for x in qkv(rng, dtype=np.float32, **shape)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_every_dtype_against_a_numpy_softmax(rng, dtype):
    q, k, v = as_torch(rng, dtype)
    pattern = attnkit.Union(attnkit.SlidingWindow.symmetric(5), attnkit.Global([0, 20]))
    mask = window_mask(4, 67, 67, 5, 5) | global_mask(4, 67, 67, [0, 20])
    expected, expected_lse = dense_attention(*(x.double().numpy() for x in (q, k, v)), mask)
    out, lse = attnkit.attention(pattern, q, k, v, lse=True)
    assert isinstance(out, torch.Tensor) and out.dtype == dtype and out.shape == (2, 4, 67, 8)
    assert lse.dtype == (torch.float64 if dtype == torch.float64 else torch.float32)
    # SPEC.md section 12: half outputs add their rounding (2^-8 bfloat16, 2^-11 float16).
    rounding = {torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11}.get(dtype, 0.0)
    bound = 2e-5 * np.abs(v.double().numpy()).max() + (1e-4 + rounding) * np.abs(expected)
    assert np.all(np.abs(out.double().numpy() - expected) <= bound)
    np.testing.assert_allclose(lse.double().numpy(), expected_lse, rtol=1e-5)
    if dtype in (torch.bfloat16, torch.float16):
        widened = torch.empty(2, 4, 67, 8)
        attnkit.attention(pattern, q, k, v, out=widened)
        assert_float_close(widened.numpy(), expected, v.double().numpy())
        reference = attnkit.reference.attention(pattern, q, k, v)
        assert reference.dtype == torch.float64
        np.testing.assert_allclose(reference.numpy(), expected, rtol=1e-12, atol=1e-12)


def test_transposed_views_and_out_are_used_in_place(rng):
    # [B, L, H, D] tensors (a projection's layout) passed as x.transpose(1, 2).
    q, k, v = (torch.from_numpy(x) for x in qkv(rng, b=2, hq=3, hk=3, lq=40, lk=40, d=8, dv=8))
    q_blhd, k_blhd, v_blhd = (x.transpose(1, 2).contiguous() for x in (q, k, v))
    out_blhd = torch.zeros(2, 40, 3, 8)
    pointer = out_blhd.data_ptr()
    result = attnkit.attention(attnkit.Full(causal=True), q_blhd.transpose(1, 2), k_blhd.transpose(1, 2),
                               v_blhd.transpose(1, 2), out=out_blhd.transpose(1, 2))
    assert result.data_ptr() == pointer and out_blhd.data_ptr() == pointer
    expected, _ = dense_attention(q.numpy(), k.numpy(), v.numpy(), full_mask(3, 40, 40, causal=True))
    assert_float_close(out_blhd.transpose(1, 2).numpy(), expected, v.numpy())


def test_no_input_is_copied(rng):
    # An input read in place: a NaN written into q's storage after the view was taken reaches the output.
    q, k, v = as_torch(rng, torch.float32)
    view = q[:, :, ::1]
    q[0, 0, 5, 0] = float("nan")
    out = attnkit.attention(attnkit.Full(), view, k, v)
    assert torch.isnan(out[0, 0, 5]).all() and not torch.isnan(out[1]).any()


def test_torch_errors(rng):
    q, k, v = as_torch(rng, torch.float32)
    out = torch.full((2, 4, 67, 8), 3.0)
    with pytest.raises(ValueError, match="k.dtype = bfloat16: must equal q.dtype = float32"):
        attnkit.attention(attnkit.Full(), q, k.bfloat16(), v, out=out)
    with pytest.raises(ValueError, match="q.dtype = int64: must be float32, float64, bfloat16 or float16"):
        attnkit.attention(attnkit.Full(), q.long(), k, v, out=out)
    with pytest.raises(ValueError, match="out.dtype = bfloat16"):
        attnkit.attention(attnkit.Full(), q, k, v, out=out.bfloat16())
    with pytest.raises(ValueError, match="strides|stride"):
        attnkit.attention(attnkit.Full(), q.transpose(2, 3), k, v, out=out)
    assert (out == 3.0).all()
    with pytest.raises(ValueError, match="out.dtype = float16: must equal q.dtype = bfloat16"):
        attnkit.attention(attnkit.Full(), q.bfloat16(), k.bfloat16(), v.bfloat16(), out=out.half())
    with pytest.raises(ValueError, match="q.ndim = 5"):
        attnkit.attention(attnkit.Full(), q[None], k, v)


def test_the_gil_is_released_during_a_call(rng):
    q, k, v = as_torch(rng, torch.float32, b=1, hq=8, hk=8, lq=2048, lk=2048, d=64, dv=64)
    ticks = []
    running = threading.Event()
    stop = threading.Event()

    def count():
        running.set()
        while not stop.is_set():
            ticks.append(time.perf_counter())

    counter = threading.Thread(target=count)
    counter.start()
    running.wait()
    start = time.perf_counter()
    attnkit.attention(attnkit.Full(), q, k, v, threads=1)
    end = time.perf_counter()
    stop.set()
    counter.join()
    # With the GIL held for the whole call the counter could not run between start and end
    # (a C++ call never yields it); released, it ticks throughout.
    inside = [t for t in ticks if start + 0.25 * (end - start) < t < end - 0.25 * (end - start)]
    assert len(inside) > 10, f"{len(inside)} ticks during a {end - start:.3f} s call"


def test_two_python_threads_call_at_once(rng):
    q, k, v = as_torch(rng, torch.float32, lq=200, lk=200)
    expected = attnkit.attention(attnkit.SlidingWindow.symmetric(8), q, k, v, threads=1)
    results = [None] * 4

    def call(index):
        for _ in range(20):
            results[index] = attnkit.attention(attnkit.SlidingWindow.symmetric(8), q, k, v, threads=1)

    threads = [threading.Thread(target=call, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for result in results:
        assert torch.equal(result, expected)
