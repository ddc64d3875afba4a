#pragma once
// ByteReader: a fuzzer input read front to back as small bounded choices.

#include <cstddef>
#include <cstdint>

#include "attnkit/core/index.hpp"

namespace attnkit::fuzz {

/// Reads bytes front to back; reads past the end give 0, so every prefix of an input is an
/// input and the empty input takes the first option of every choice (the smallest valid call).
/// Hostile values (negative sizes, unsorted tokens, ...) hide behind rare(), so that most
/// inputs the fuzzer derives reach the kernels rather than the argument checks.
class ByteReader {
 public:
  ByteReader(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}

  std::uint8_t byte() { return position_ < size_ ? data_[position_++] : 0; }
  bool flag() { return (byte() & 1) != 0; }
  /// True for about one byte value in 16.
  bool rare() { return byte() >= 0xF0; }
  /// A value in [lo, hi] (lo <= hi): one byte, two when the range exceeds 256 values.
  index_t in_range(index_t lo, index_t hi) {
    const auto span = static_cast<std::uint64_t>(hi - lo) + 1;
    std::uint64_t bits = byte();
    if (span > 256) bits = bits << 8 | byte();
    return lo + static_cast<index_t>(bits % span);
  }
  /// 16 bits for a generator seed.
  std::uint64_t seed() {
    const std::uint64_t high = byte();
    return high << 8 | byte();
  }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t position_ = 0;
};

}  // namespace attnkit::fuzz
