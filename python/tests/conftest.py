"""Shared helpers of the Python tests: inputs, SPEC.md section 11's tolerance, and dense NumPy
float64 masks written from SPEC.md's definitions (independent of attnkit's code)."""

import numpy as np
import pytest


@pytest.fixture
def rng():
    return np.random.default_rng(20261204)


def qkv(rng, b=2, hq=4, hk=2, lq=67, lk=67, d=16, dv=8, dtype=np.float32):
    """N(0, 1) q [B, Hq, Lq, D], k [B, Hk, Lk, D], v [B, Hk, Lk, Dv]."""
    q = rng.standard_normal((b, hq, lq, d)).astype(dtype)
    k = rng.standard_normal((b, hk, lk, d)).astype(dtype)
    v = rng.standard_normal((b, hk, lk, dv)).astype(dtype)
    return q, k, v


def assert_float_close(out, ref, v):
    """SPEC.md section 11: |o - ref| <= 2e-5 max|V| + 1e-4 |ref| (float kernels)."""
    out = np.asarray(out, dtype=np.float64)
    atol = 2e-5 * float(np.max(np.abs(np.asarray(v, dtype=np.float64))))
    bound = atol + 1e-4 * np.abs(ref)
    worst = np.max(np.abs(out - ref) - bound)
    assert worst <= 0, f"exceeds the float tolerance by {worst}"


def dense_attention(q, k, v, mask, scale=None, softcap=0.0, alibi_slopes=None):
    """softmax(scale q k^T + log mask) v in float64, mask [Hq, Lq, Lk] of 0/1 or of multiplicities mu (SPEC.md
    section 0: key j enters row i's softmax mu_ij times); GQA by h // (Hq / Hk). A row with no key gives zeros.
    Score modifiers (SPEC.md section 14): s <- softcap tanh(s / softcap), then s <- s - m_h |p - j| with query i
    at position p = i + Lk - Lq."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    b, hq, lq, d = q.shape
    lk = k.shape[2]
    group = hq // k.shape[1]
    scale = 1.0 / np.sqrt(d) if scale is None else scale
    out = np.zeros((b, hq, lq, v.shape[3]))
    lse = np.full((b, hq, lq), -np.inf)
    i, j = positions(lq, lk)
    for h in range(hq):
        logits = scale * q[:, h] @ k[:, h // group].transpose(0, 2, 1)
        if softcap > 0:
            logits = softcap * np.tanh(logits / softcap)
        if alibi_slopes is not None:
            logits = logits - alibi_slopes[h] * np.abs(i + lk - lq - j)[None]
        logits = np.where(mask[h][None] > 0, logits, -np.inf)
        top = np.max(logits, axis=2, keepdims=True)
        top = np.where(np.isfinite(top), top, 0.0)
        weights = np.exp(logits - top) * mask[h][None]
        total = weights.sum(axis=2, keepdims=True)
        out[:, h] = np.where(total > 0, (weights @ v[:, h // group]) / np.where(total > 0, total, 1), 0.0)
        lse[:, h] = np.where(total[..., 0] > 0, np.log(np.where(total[..., 0] > 0, total[..., 0], 1)) + top[..., 0],
                             -np.inf)
    return out, lse


def positions(lq, lk):
    """Query i, key j grids; bottom-right alignment puts query i at key position i + lk - lq."""
    i = np.arange(lq)[:, None]
    j = np.arange(lk)[None, :]
    return i, j


def full_mask(hq, lq, lk, causal=False):
    i, j = positions(lq, lk)
    m = (j <= i + lk - lq) if causal else np.ones((lq, lk), bool)
    return np.broadcast_to(m, (hq, lq, lk))


def window_mask(hq, lq, lk, left, right, sinks=0):
    """SPEC.md section 2, with attention sinks: keys j < sinks that the row reaches causally (j <= i)."""
    i, j = positions(lq, lk)
    return np.broadcast_to(((j >= i - left) & (j <= i + right)) | ((j < sinks) & (j <= i)), (hq, lq, lk))


def dilated_mask(hq, lq, lk, left, right, dilations):
    i, j = positions(lq, lk)
    masks = []
    for h in range(hq):
        d = dilations[h] if len(dilations) > 1 else dilations[0]
        t = j - i
        masks.append((t % d == 0) & (t >= -left * d) & (t <= right * d))
    return np.stack(masks)


def global_mask(hq, lq, lk, tokens):
    i, j = positions(lq, lk)
    g = np.zeros(max(lq, lk), bool)
    g[[t for t in tokens if t < len(g)]] = True
    return np.broadcast_to(g[:lq][:, None] | g[:lk][None, :], (hq, lq, lk))


def block_mask(hq, lq, lk, block, bitmaps, causal=False):
    i, j = positions(lq, lk)
    masks = []
    for h in range(hq):
        bits = np.asarray(bitmaps[h] if len(bitmaps) > 1 else bitmaps[0], bool)
        m = bits[i // block, j // block]
        if causal:
            m &= j <= i
        masks.append(m)
    return np.stack(masks)
