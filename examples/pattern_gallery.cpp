// Pattern gallery: writes one SVG picture per attention pattern (the mask of one query head,
// rows = queries, columns = keys, filled = attended) into a directory. The pictures in
// docs/gallery/ are its output; ctest regenerates them and checks they are unchanged.
//
//   pattern_gallery OUTPUT_DIRECTORY

#include <cstdio>
#include <fstream>
#include <string>

#include <attnkit/attnkit.hpp>

namespace {

constexpr attnkit::index_t kTokens = 96;  // sequence length of every picture
constexpr int kCell = 4;                  // pixels per (query, key) cell

/// Writes the mask of `head` as an SVG: one rectangle per run of attended keys in a row.
template <class Pattern>
bool write_picture(const std::string& directory, const std::string& name, const std::string& title,
                   const Pattern& pattern, attnkit::index_t heads = 1, attnkit::index_t head = 0) {
  const attnkit::AttentionShape shape{1, heads, heads, kTokens, kTokens, 1, 1};
  const auto mask = pattern.mask(shape);
  const int side = static_cast<int>(kTokens) * kCell, caption = 36;
  std::ofstream svg(directory + "/" + name + ".svg");
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << side + 2 << "\" height=\"" << side + caption + 2
      << "\" font-family=\"sans-serif\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"1\" y=\"15\" font-size=\"13\">" << title << "</text>\n"
      << "<text x=\"1\" y=\"30\" font-size=\"11\" fill=\"#555\">n = " << kTokens << ", head " << head << ", "
      << attnkit::attended_keys(pattern, shape, head, kTokens / 2) << " keys in row " << kTokens / 2 << ", density "
      << static_cast<int>(100 * pattern.cost(shape).density + 0.5) << "%</text>\n"
      << "<g transform=\"translate(1," << caption + 1 << ")\" fill=\"#1f4e79\">\n"
      << "<rect width=\"" << side << "\" height=\"" << side << "\" fill=\"#f2f2f2\"/>\n";
  for (attnkit::index_t i = 0; i < kTokens; ++i) {
    for (attnkit::index_t j = 0; j < kTokens;) {
      if (mask.multiplicity(head, i, j) == 0) {
        ++j;
        continue;
      }
      attnkit::index_t end = j;
      while (end < kTokens && mask.multiplicity(head, i, end) > 0) ++end;
      svg << "<rect x=\"" << j * kCell << "\" y=\"" << i * kCell << "\" width=\"" << (end - j) * kCell << "\" height=\""
          << kCell << "\"/>\n";
      j = end;
    }
  }
  svg << "</g>\n</svg>\n";
  return static_cast<bool>(svg);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: pattern_gallery OUTPUT_DIRECTORY\n");
    return 2;
  }
  const std::string dir = argv[1];
  using namespace attnkit;
  bool ok = true;
  ok &= write_picture(dir, "full_causal", "Full{.causal = true}", Full{.causal = true});
  ok &= write_picture(dir, "sliding_window", "SlidingWindow::symmetric(8)", SlidingWindow::symmetric(8));
  ok &= write_picture(dir, "dilated", "Dilated::symmetric(4, {1, 3}), head 1", Dilated::symmetric(4, {1, 3}), 2, 1);
  ok &= write_picture(dir, "longformer", "Union{Dilated::symmetric(4, {2}), Global({0, 50})}",
                      Union{Dilated::symmetric(4, {2}), Global({0, 50})});
  ok &= write_picture(dir, "block_sparse_blockbert", "BlockSparse::cyclic_shifts(16, 6, {0, 2}), head 1",
                      BlockSparse::cyclic_shifts(16, 6, {0, 2}), 2, 1);
  ok &= write_picture(dir, "big_bird", "BigBird(8, 2, seed 7)", BigBird(8, 2, 7));
  ok &= write_picture(dir, "causal_window_union_global", "Union{window 6, Global({20})} made causal",
                      Intersection{Union{SlidingWindow(6, 6), Global({20})}, Full{.causal = true}});
  std::printf(ok ? "gallery written to %s\n" : "could not write the gallery to %s\n", dir.c_str());
  return ok ? 0 : 1;
}
