// Helpers for the hand-written SVG and HTML of the example programs: escaping text for XML, a
// sequential colour scale for heat maps, and cutting labels to length.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

namespace kiln {

// text with & < > " ' as entities, so it is safe in element content and in quoted attributes.
// What XML 1.0 cannot carry even escaped (control bytes other than tab, newline and CR, U+FFFE,
// U+FFFF, bytes that are not UTF-8) becomes U+FFFD, so the document always parses.
std::string xml_escape(std::string_view text);

// The colour scale's stops, light to dark (ColorBrewer "Blues"): 0 is near-white, 1 dark blue.
inline constexpr std::array<const char*, 9> kHeatStops = {"#f7fbff", "#deebf7", "#c6dbef",
                                                          "#9ecae1", "#6baed6", "#4292c6",
                                                          "#2171b5", "#08519c", "#08306b"};

// "#rrggbb" for x in [0, 1] (clamped), interpolated linearly between kHeatStops.
std::string heat_colour(double x);

// text cut to at most max_chars code points, the last one "…" when cut (text is UTF-8).
std::string shorten(std::string_view text, std::size_t max_chars);

// The number of code points of UTF-8 text (bytes that do not continue a sequence).
std::size_t count_chars(std::string_view text);

}  // namespace kiln
