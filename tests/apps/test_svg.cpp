// The SVG helpers (apps/common/svg.h, attention_map.h): escaping keeps any token parseable,
// the colour scale runs light to dark, a map has one cell per (query, key) pair.
#include <catch2/catch.hpp>

#include "apps/common/attention_map.h"
#include "apps/common/svg.h"

using namespace kiln;

namespace {

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("xml_escape turns the five special characters into entities") {
  REQUIRE(xml_escape("a<b>&\"c\"'s") == "a&lt;b&gt;&amp;&quot;c&quot;&apos;s");
  REQUIRE(xml_escape("<unk> @-@ plain") == "&lt;unk&gt; @-@ plain");
  REQUIRE(xml_escape("caf\xC3\xA9 \xE2\x86\x92") == "caf\xC3\xA9 \xE2\x86\x92");  // UTF-8 kept
}

TEST_CASE("xml_escape replaces what XML cannot carry with U+FFFD") {
  const std::string fffd = "\xEF\xBF\xBD";
  REQUIRE(xml_escape(std::string("a\x01z", 3)) == "a" + fffd + "z");
  REQUIRE(xml_escape(std::string("a\0z", 3)) == "a" + fffd + "z");
  REQUIRE(xml_escape("tab\tok") == "tab\tok");
  REQUIRE(xml_escape("\xEF\xBF\xBE") == fffd);        // U+FFFE
  REQUIRE(xml_escape("x\xFFy") == "x" + fffd + "y");  // not UTF-8
  REQUIRE(xml_escape("\xC3") == fffd);                // a cut sequence
}

TEST_CASE("shorten cuts at code points and marks the cut") {
  REQUIRE(shorten("short", 14) == "short");
  REQUIRE(shorten("abcdef", 4) == "abc\xE2\x80\xA6");
  REQUIRE(shorten("\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9", 3) == "\xC3\xA9\xC3\xA9\xE2\x80\xA6");
  REQUIRE(count_chars("\xC3\xA9t\xC3\xA9") == 3);
}

TEST_CASE("the colour scale runs from its first stop to its last") {
  REQUIRE(heat_colour(0) == kHeatStops.front());
  REQUIRE(heat_colour(1) == kHeatStops.back());
  REQUIRE(heat_colour(-3) == kHeatStops.front());
  REQUIRE(heat_colour(7) == kHeatStops.back());
  REQUIRE(heat_colour(0.5) == kHeatStops[4]);
}

TEST_CASE("an attention map has T squared cells, labels, a title and a colour scale") {
  const std::vector<std::string> tokens{"the", "<unk>", "&", "cat"};
  std::vector<float> A(16, 0.0f);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j <= i; ++j) A[i * 4 + j] = 1.0f / (i + 1);
  const std::string svg = attention_svg(A, tokens, "layer 1, head 0 <b>");
  REQUIRE(count(svg, "data-q=") == 16);
  REQUIRE(count(svg, "class=\"cell masked\"") == 6);
  REQUIRE(svg.find("<title>layer 1, head 0 &lt;b&gt;</title>") != std::string::npos);
  REQUIRE(svg.find("class=\"title\"") != std::string::npos);
  REQUIRE(svg.find("&lt;unk&gt;</text>") != std::string::npos);  // a label
  REQUIRE(svg.find("&amp;</text>") != std::string::npos);
  REQUIRE(svg.find("<linearGradient") != std::string::npos);
  REQUIRE(svg.find("data-q=\"3\" data-k=\"0\" data-p=\"0.25\"") != std::string::npos);
  REQUIRE_THROWS_WITH(attention_svg(std::vector<float>(15), tokens, "t"),
                      Catch::Contains("15 probabilities for 4 tokens"));
  A[5] = NAN;
  REQUIRE_THROWS_WITH(attention_svg(A, tokens, "t"), Catch::Contains("not finite"));
}

TEST_CASE("the index page links every map, layers as rows and heads as columns") {
  const std::string html = attention_index_html("a & b", {"x", "<y>"}, 3, 2);
  for (int l = 0; l < 3; ++l)
    for (int h = 0; h < 2; ++h)
      REQUIRE(html.find("href=\"" + attention_svg_name(l, h) + "\"") != std::string::npos);
  REQUIRE(count(html, "<tr>") == 4);  // the header row and one per layer
  REQUIRE(html.find("a &amp; b") != std::string::npos);
  REQUIRE(html.find("x &lt;y&gt;") != std::string::npos);
}
