#include "apps/common/attention_map.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include <fmt/format.h>

#include "apps/common/svg.h"
#include "core/error.h"

namespace kiln {

namespace {

constexpr const char* kMaskedColour = "#d9d9d9";
constexpr std::size_t kLabelChars = 14;  // longer tokens are cut in labels (tooltips keep them)
constexpr int kPad = 10;

}  // namespace

std::string attention_svg(std::span<const float> A, const std::vector<std::string>& tokens,
                          std::string_view title) {
  const auto T = static_cast<std::int64_t>(tokens.size());
  KILN_CHECK(T > 0 && static_cast<std::int64_t>(A.size()) == T * T,
             "attention_svg: {} probabilities for {} tokens (expected {})", A.size(), T, T * T);

  // Cells shrink as T grows so a map stays about 500 px wide; labels follow the cells.
  const int cell = static_cast<int>(std::clamp<std::int64_t>(500 / T, 6, 28));
  const int font = std::clamp(cell - 2, 7, 12);
  std::vector<std::string> labels;
  std::size_t longest = 1;
  for (const std::string& token : tokens) {
    labels.push_back(shorten(token, kLabelChars));
    longest = std::max(longest, count_chars(labels.back()));
  }
  // Monospace glyphs are about 0.6 em wide.
  const int label_space = static_cast<int>(std::ceil(0.6 * font * longest)) + 6;
  const int grid = static_cast<int>(T) * cell;
  const int grid_x = kPad + label_space, grid_y = 46 + label_space;
  const int bar_x = grid_x + grid + 24, bar_height = std::max(grid, 120);
  const int width = std::max(
      {bar_x + 14 + 44 + kPad, 2 * kPad + static_cast<int>(8.5 * count_chars(title)), 330});
  const int height = grid_y + std::max(grid, bar_height + 36) + kPad;

  std::string svg;
  auto out = std::back_inserter(svg);
  fmt::format_to(out,
                 "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" "
                 "viewBox=\"0 0 {0} {1}\" font-family=\"sans-serif\">\n",
                 width, height);
  fmt::format_to(out, "<title>{}</title>\n", xml_escape(title));
  svg += "<style>.cell:hover{stroke:#d62728;stroke-width:2}</style>\n";
  svg += "<defs><linearGradient id=\"scale\" x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\">";
  for (std::size_t s = 0; s < kHeatStops.size(); ++s)
    fmt::format_to(out, "<stop offset=\"{}\" stop-color=\"{}\"/>",
                   static_cast<double>(s) / (kHeatStops.size() - 1), kHeatStops[s]);
  svg += "</linearGradient></defs>\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  fmt::format_to(out, "<text class=\"title\" x=\"{}\" y=\"20\" font-size=\"15\">{}</text>\n", kPad,
                 xml_escape(title));
  fmt::format_to(out,
                 "<text x=\"{}\" y=\"38\" font-size=\"11\" fill=\"#555\">rows: queries, columns: "
                 "keys; each row sums to 1</text>\n",
                 kPad);

  // Token labels: queries down the left, keys across the top (rotated to read upwards).
  fmt::format_to(out, "<g font-family=\"monospace\" font-size=\"{}\">\n", font);
  for (std::int64_t i = 0; i < T; ++i) {
    const int middle = static_cast<int>(i) * cell + cell / 2;
    const std::string label = xml_escape(labels[i]);
    fmt::format_to(out, "<text x=\"{}\" y=\"{}\" dy=\"0.35em\" text-anchor=\"end\">{}</text>\n",
                   grid_x - 4, grid_y + middle, label);
    fmt::format_to(out,
                   "<text transform=\"translate({},{}) rotate(-90)\" dy=\"0.35em\">{}</text>\n",
                   grid_x + middle, grid_y - 4, label);
  }
  svg += "</g>\n";

  // One cell per (query, key) pair.
  svg += "<g class=\"cells\">\n";
  for (std::int64_t i = 0; i < T; ++i) {
    for (std::int64_t j = 0; j < T; ++j) {
      const float p = A[i * T + j];
      KILN_CHECK(std::isfinite(p), "attention_svg: A[{}, {}] = {} is not finite ({})", i, j, p,
                 title);
      const bool masked = j > i;
      fmt::format_to(out,
                     "<rect class=\"cell{}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" "
                     "fill=\"{}\" data-q=\"{}\" data-k=\"{}\" data-p=\"{:.6g}\">"
                     "<title>query {} {} \xE2\x86\x92 key {} {}: {:.4f}{}</title></rect>\n",
                     masked ? " masked" : "", grid_x + j * cell, grid_y + i * cell, cell, cell,
                     masked ? kMaskedColour : heat_colour(p), i, j, p, i, xml_escape(tokens[i]), j,
                     xml_escape(tokens[j]), p, masked ? " (future, masked)" : "");
    }
  }
  svg += "</g>\n";

  // The colour scale: a bar from 0 (bottom) to 1 (top), and the masked swatch below it.
  fmt::format_to(out, "<g class=\"scale\" font-size=\"10\">\n");
  fmt::format_to(out,
                 "<rect x=\"{}\" y=\"{}\" width=\"14\" height=\"{}\" fill=\"url(#scale)\" "
                 "stroke=\"#999\"/>\n",
                 bar_x, grid_y, bar_height);
  for (int tick = 0; tick <= 4; ++tick) {
    const int y = grid_y + bar_height - tick * bar_height / 4;
    fmt::format_to(out, "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#555\"/>",
                   bar_x + 14, y, bar_x + 18);
    fmt::format_to(out, "<text x=\"{}\" y=\"{}\" dy=\"0.35em\">{}</text>\n", bar_x + 20, y,
                   tick * 0.25);
  }
  fmt::format_to(out, "<text x=\"{}\" y=\"{}\">A</text>\n", bar_x, grid_y - 6);
  const int swatch_y = grid_y + bar_height + 12;
  fmt::format_to(out,
                 "<rect x=\"{}\" y=\"{}\" width=\"14\" height=\"14\" fill=\"{}\"/>"
                 "<text x=\"{}\" y=\"{}\" dy=\"0.35em\">masked</text>\n",
                 bar_x, swatch_y, kMaskedColour, bar_x + 18, swatch_y + 7);
  svg += "</g>\n</svg>\n";
  return svg;
}

std::string attention_svg_name(std::int64_t layer, std::int64_t head) {
  return fmt::format("layer{}_head{}.svg", layer, head);
}

std::string attention_index_html(std::string_view description,
                                 const std::vector<std::string>& tokens, std::int64_t layers,
                                 std::int64_t heads) {
  std::string html;
  auto out = std::back_inserter(html);
  html +=
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n"
      "<title>Attention maps</title>\n<style>\n"
      "body { font-family: sans-serif; margin: 16px; }\n"
      "table { border-collapse: collapse; }\n"
      "th, td { padding: 4px; vertical-align: top; }\n"
      "img { width: 360px; height: auto; border: 1px solid #ddd; }\n"
      ".tokens { font-family: monospace; }\n"
      "</style>\n</head>\n<body>\n<h1>Attention maps</h1>\n";
  fmt::format_to(out, "<p>{}</p>\n", xml_escape(description));
  std::string joined;
  for (const std::string& token : tokens) joined += (joined.empty() ? "" : " ") + token;
  fmt::format_to(out, "<p>Tokens ({}): <span class=\"tokens\">{}</span></p>\n", tokens.size(),
                 xml_escape(joined));
  html +=
      "<p>Each map is one head's attention probabilities A = softmax(Q K<sup>T</sup> / "
      "&#8730;d<sub>head</sub>): row = query token, column = key token, each row sums to 1, "
      "grey cells are future keys (masked, exactly 0). Heads that attend to different things "
      "show different patterns. Click a map to open it full size.</p>\n<table>\n<tr><th></th>";
  for (std::int64_t h = 0; h < heads; ++h) fmt::format_to(out, "<th>head {}</th>", h);
  html += "</tr>\n";
  for (std::int64_t l = 0; l < layers; ++l) {
    fmt::format_to(out, "<tr><th>layer {}</th>", l);
    for (std::int64_t h = 0; h < heads; ++h) {
      const std::string name = attention_svg_name(l, h);
      fmt::format_to(out,
                     "<td><a href=\"{0}\"><img src=\"{0}\" alt=\"layer {1}, head {2}\"/></a></td>",
                     name, l, h);
    }
    html += "</tr>\n";
  }
  html += "</table>\n</body>\n</html>\n";
  return html;
}

}  // namespace kiln
