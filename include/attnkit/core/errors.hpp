#pragma once
// attnkit::invalid_argument: the one exception type for bad input.

#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

namespace attnkit {

/// Thrown before anything is written when a call's arguments break a documented rule.
/// The message names the argument, its value and the rule, e.g.
/// "attnkit: k.heads = 3: q.heads (8) must be a multiple of k.heads".
class invalid_argument : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

namespace detail {

/// Throws attnkit::invalid_argument as "attnkit: <argument> = <value>: <rule>".
template <class Value>
[[noreturn]] void reject(std::string_view argument, const Value& value, std::string_view rule) {
  std::ostringstream message;
  message << "attnkit: " << argument << " = " << value << ": " << rule;
  throw attnkit::invalid_argument(message.str());
}

}  // namespace detail
}  // namespace attnkit
