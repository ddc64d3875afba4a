"""attnkit: CPU attention kernels for efficient Transformers, on NumPy arrays and PyTorch tensors.

Every call reads its inputs where they are (no copies) and releases the GIL while it runs::

    import attnkit, torch
    q = k = v = torch.randn(1, 8, 4096, 64)
    out = attnkit.attention(attnkit.SlidingWindow.symmetric(256), q, k, v)

The pattern classes are named and parameterised as the C++ ones (README "Python").
"""

from attnkit._attnkit import (  # noqa: F401 (the public names of the package)
    AttentionShape,
    BigBird,
    BlockLayout,
    BlockSparse,
    Dilated,
    FeatureMap,
    Full,
    Global,
    Intersection,
    KernelizedRpe,
    KvCache,
    Linformer,
    Lsh,
    PagedKvCache,
    PatternCost,
    PerHead,
    RpeAlgorithm,
    RpeBias,
    RpeFft,
    Schedule,
    ScheduleCost,
    SlidingWindow,
    Union,
    alibi_slopes,
    append,
    ascii_view,
    attended_keys,
    attention,
    cost,
    dispatch,
    kinds,
    reference,
)

__all__ = [name for name in dir() if not name.startswith("_")]
