#include "apps/common/svg.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/io/utf8.h"

namespace kiln {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Escapes text that is valid UTF-8.
void append_escaped(std::string& out, std::string_view text) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      case '\t':
      case '\n':
      case '\r':
        out += static_cast<char>(c);
        break;
      default:
        if (c < 0x20) {
          out += kReplacement;
        } else if (c == 0xEF && i + 2 < text.size() && text[i + 1] == '\xBF' &&
                   (text[i + 2] == '\xBE' || text[i + 2] == '\xBF')) {
          out += kReplacement;  // U+FFFE, U+FFFF
          i += 2;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
}

}  // namespace

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  while (!text.empty()) {
    const std::size_t bad = find_invalid_utf8(text);
    append_escaped(out, text.substr(0, bad));
    if (bad == std::string_view::npos) break;
    out += kReplacement;
    text.remove_prefix(bad + 1);
  }
  return out;
}

std::string heat_colour(double x) {
  const double position = std::clamp(x, 0.0, 1.0) * (kHeatStops.size() - 1);
  const std::size_t low = std::min(static_cast<std::size_t>(position), kHeatStops.size() - 2);
  const double t = position - static_cast<double>(low);
  auto channel = [](const char* hex, int c) {
    return std::stoi(std::string(hex + 1 + 2 * c, 2), nullptr, 16);
  };
  std::string out = "#";
  for (int c = 0; c < 3; ++c) {
    const double a = channel(kHeatStops[low], c), b = channel(kHeatStops[low + 1], c);
    out += fmt::format("{:02x}", static_cast<int>(std::lround(a + (b - a) * t)));
  }
  return out;
}

std::size_t count_chars(std::string_view text) {
  return static_cast<std::size_t>(std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  }));
}

std::string shorten(std::string_view text, std::size_t max_chars) {
  if (max_chars == 0) return "";
  if (count_chars(text) <= max_chars) return std::string(text);
  std::size_t chars = 0, end = 0;
  // Keep max_chars - 1 code points, then the ellipsis.
  while (end < text.size()) {
    if ((static_cast<unsigned char>(text[end]) & 0xC0) != 0x80 && chars++ == max_chars - 1) break;
    ++end;
  }
  return std::string(text.substr(0, end)) + "\xE2\x80\xA6";  // …
}

}  // namespace kiln
