#pragma once
// The registry of attnkit's kinds: the one list of the library's attention kinds, each with
// its name. Everything that enumerates kinds derives from it: attnkit::Schedule's layer
// (pattern/schedule.hpp), attnkit::dispatch's compiled kinds (dispatch/kernel_table.hpp), the
// dispatch tests' and the fuzzer's kinds, the bench's all-kinds table. A new kind is one
// entry here plus its own files (README "Where does my code go").

#include <array>
#include <cstddef>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

#include "attnkit/pattern/big_bird.hpp"
#include "attnkit/pattern/block_sparse.hpp"
#include "attnkit/pattern/dilated.hpp"
#include "attnkit/pattern/full.hpp"
#include "attnkit/pattern/global.hpp"
#include "attnkit/pattern/kernelized_rpe.hpp"
#include "attnkit/pattern/linformer.hpp"
#include "attnkit/pattern/lsh.hpp"
#include "attnkit/pattern/sliding_window.hpp"

namespace attnkit {

/// A string literal usable as a template argument (a kind's name in KindEntry).
template <std::size_t N>
struct KindName {
  constexpr KindName(const char (&text)[N]) {  // NOLINT(google-explicit-constructor): written as a literal
    for (std::size_t i = 0; i < N; ++i) chars[i] = text[i];
  }
  constexpr std::string_view view() const { return std::string_view(chars, N - 1); }
  char chars[N];
};

/// One kind: its pattern type and its name (the C++ type's name; tools print it).
template <class P, KindName Name>
struct KindEntry {
  using Pattern = P;
  static constexpr std::string_view name = Name.view();
};

/// A list of kinds. Variant: a std::variant of their patterns (a Schedule layer);
/// Apply<Template>: Template<patterns...>; names: the names in list order;
/// for_each(f): f(std::type_identity<Pattern>{}, index) for each kind in order.
template <class... Entries>
struct KindList {
  using Variant = std::variant<typename Entries::Pattern...>;
  template <template <class...> class Template>
  using Apply = Template<typename Entries::Pattern...>;
  static constexpr std::size_t size = sizeof...(Entries);
  static constexpr std::array<std::string_view, sizeof...(Entries)> names{Entries::name...};

  template <class F>
  static constexpr void for_each(F&& f) {
    for_each_indexed(f, std::index_sequence_for<Entries...>{});
  }

  /// The name of the kind whose pattern type is P.
  template <class P>
  static constexpr std::string_view name_of() {
    static_assert((std::is_same_v<P, typename Entries::Pattern> || ...), "name_of<P>: P is not a registered kind");
    std::string_view name;
    (void)((std::is_same_v<P, typename Entries::Pattern> ? (name = Entries::name, true) : false) || ...);
    return name;
  }

 private:
  template <class F, std::size_t... I>
  static constexpr void for_each_indexed(F& f, std::index_sequence<I...>) {
    (f(std::type_identity<typename Entries::Pattern>{}, I), ...);
  }
};

/// Every kind of the library, in a fixed order (a kind's index is its place here). Add a
/// kind by appending its entry: the registry's users pick it up (or fail to compile, naming
/// what the new kind still needs, such as its fuzz decoder or bench configuration).
using Kinds = KindList<KindEntry<Full, "Full">,                    //
                       KindEntry<SlidingWindow, "SlidingWindow">,  //
                       KindEntry<Dilated, "Dilated">,              //
                       KindEntry<Global, "Global">,                //
                       KindEntry<BlockSparse, "BlockSparse">,      //
                       KindEntry<BigBird, "BigBird">,              //
                       KindEntry<Linformer, "Linformer">,          //
                       KindEntry<Lsh, "Lsh">,                      //
                       KindEntry<KernelizedRpe, "KernelizedRpe">>;

/// A pattern of any registered kind (what one Schedule layer holds).
using AnyKind = Kinds::Variant;

/// The registered name of P's kind ("Full", "SlidingWindow", ...).
template <class P>
inline constexpr std::string_view kind_name = Kinds::name_of<P>();

}  // namespace attnkit
