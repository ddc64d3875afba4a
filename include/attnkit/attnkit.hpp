#pragma once
// attnkit: header-only CPU attention kernels. Include this one header.
//
//   attnkit::attention(attnkit::Full{.causal = true}, q, k, v, out);
//
// Patterns live in attnkit/pattern/ (the list of kinds: pattern/kinds.hpp), the kernels that
// run them in attnkit/kernel/, and the float64 references in attnkit/reference/. Interop
// headers are included on purpose, not from here: attnkit/eigen.hpp (one head as Eigen
// matrices), attnkit/dispatch.hpp (kernels chosen at run time; links attnkit::dispatch).
// docs/architecture.md maps the pieces; the "SPEC.md section N" that comments cite is
// docs/SPEC.md.

#include "attnkit/attention.hpp"
#include "attnkit/cache/append.hpp"
#include "attnkit/cache/kv_cache.hpp"
#include "attnkit/cache/sequence_pattern.hpp"
#include "attnkit/core/call.hpp"
#include "attnkit/core/concepts.hpp"
#include "attnkit/core/cost.hpp"
#include "attnkit/core/errors.hpp"
#include "attnkit/core/half.hpp"
#include "attnkit/core/options.hpp"
#include "attnkit/core/plan_call.hpp"
#include "attnkit/core/q8_block.hpp"
#include "attnkit/core/rng.hpp"
#include "attnkit/core/rpe_bias.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/core/tensor_view.hpp"
#include "attnkit/decode.hpp"
#include "attnkit/global_projections.hpp"
#include "attnkit/packed.hpp"
#include "attnkit/pattern/ascii_view.hpp"
#include "attnkit/pattern/attended_keys.hpp"
#include "attnkit/pattern/big_bird.hpp"
#include "attnkit/pattern/block_layout.hpp"
#include "attnkit/pattern/block_sparse.hpp"
#include "attnkit/pattern/dilated.hpp"
#include "attnkit/pattern/full.hpp"
#include "attnkit/pattern/global.hpp"
#include "attnkit/pattern/intersection.hpp"
#include "attnkit/pattern/kernelized_rpe.hpp"
#include "attnkit/pattern/kinds.hpp"
#include "attnkit/pattern/linformer.hpp"
#include "attnkit/pattern/lsh.hpp"
#include "attnkit/pattern/per_head.hpp"
#include "attnkit/pattern/schedule.hpp"
#include "attnkit/pattern/sliding_window.hpp"
#include "attnkit/pattern/union.hpp"
#include "attnkit/reference/attention.hpp"
#include "attnkit/reference/decode.hpp"
