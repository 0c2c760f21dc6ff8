// Heat maps of attention probabilities, as hand-written SVG, and an index page that shows them
// side by side (attention_maps writes them).
//
// A map shows one head's A = softmax(Q K^T / sqrt(d_head)) with the causal mask, for one text:
// row i is query token i, column j key token j, so each row sums to 1 and the cells right of
// the diagonal (future keys, masked) are exactly 0 and drawn grey. Both axes are labelled with
// the tokens; each cell is one <rect class="cell"> carrying data-q, data-k and data-p (its
// probability) and a tooltip, so tests and scripts can read the values back.
//
//   std::string svg = attention_svg(A, tokens, "layer 0, head 1");   // A: T*T floats
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

// The SVG of one head's attention: A holds T x T probabilities row-major (rows = queries,
// columns = keys) for T = tokens.size(); title heads the image. A wrong size or a value that
// is not finite is an error.
std::string attention_svg(std::span<const float> A, const std::vector<std::string>& tokens,
                          std::string_view title);

// The file name of a map inside the output folder: "layer<l>_head<h>.svg" (0-based, as in the
// parameter paths blocks.<l>.attn).
std::string attention_svg_name(std::int64_t layer, std::int64_t head);

// index.html: a heading, a description paragraph, the tokens, and a grid of every map (layers
// as rows, heads as columns), each linking its SVG. The page is also well-formed XML.
std::string attention_index_html(std::string_view description,
                                 const std::vector<std::string>& tokens, std::int64_t layers,
                                 std::int64_t heads);

}  // namespace kiln
