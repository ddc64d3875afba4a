#!/usr/bin/env python3
"""A Longformer-style self-attention layer whose attention core is attnkit.attention.

The layer keeps its torch projections; only softmax(q k^T / sqrt(d) + mask) v, the part that
costs O(n^2) with a dense mask, is replaced by attnkit's sliding window united with global
tokens, read from the projections' [B, L, H, D] layout without a copy. Run with Debian's
/usr/bin/python3 after `cmake --workflow --preset python`:

    /usr/bin/python3 examples/python/longformer_layer.py
"""

import time

import torch

import attnkit


class LongformerStyleAttention(torch.nn.Module):
    def __init__(self, hidden, heads, attention_window, global_tokens):
        super().__init__()
        self.heads, self.dim = heads, hidden // heads
        self.qkv = torch.nn.Linear(hidden, 3 * hidden)
        self.output = torch.nn.Linear(hidden, hidden)
        # HF's attention_window is the total width (512 -> radius 256 on each side).
        self.pattern = attnkit.Union(attnkit.SlidingWindow.from_hf_attention_window(attention_window),
                                     attnkit.Global(global_tokens))

    def forward(self, x):
        b, n, hidden = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, self.dim).unbind(2)  # each [B, L, H, D], strided
        out = torch.empty(b, n, self.heads, self.dim)
        # [B, H, L, D] views of the [B, L, H, D] tensors: attnkit reads and writes them in place.
        attnkit.attention(self.pattern, q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                          out=out.transpose(1, 2))
        return self.output(out.reshape(b, n, hidden))


def dense_forward(layer, x, mask):
    """The same layer with the attention core a plain torch user would write (a dense mask)."""
    b, n, hidden = x.shape
    q, k, v = (t.transpose(1, 2) for t in layer.qkv(x).view(b, n, 3, layer.heads, layer.dim).unbind(2))
    scores = q @ k.transpose(-1, -2) / layer.dim**0.5
    out = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1) @ v
    return layer.output(out.transpose(1, 2).reshape(b, n, hidden))


def main():
    torch.manual_seed(0)
    n, hidden, heads, window, tokens = 2048, 768, 12, 512, [0, 1, 2]
    layer = LongformerStyleAttention(hidden, heads, window, tokens).eval()
    x = torch.randn(1, n, hidden)
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    is_global = torch.zeros(n, dtype=torch.bool)
    is_global[tokens] = True
    mask = ((i - j).abs() <= window // 2) | is_global[:, None] | is_global[None, :]
    with torch.no_grad():
        start = time.perf_counter()
        ours = layer(x)
        middle = time.perf_counter()
        theirs = dense_forward(layer, x, mask)
        end = time.perf_counter()
    print(f"max |attnkit layer - dense-mask layer| = {(ours - theirs).abs().max().item():.2e}")
    print(f"layer forward, n = {n}: attnkit core {1e3 * (middle - start):.0f} ms, dense mask {1e3 * (end - middle):.0f} ms "
          f"(one call each, including the projections; bench/python/compare_torch.py measures paired ratios)")


if __name__ == "__main__":
    main()
