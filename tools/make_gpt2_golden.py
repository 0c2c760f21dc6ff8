#!/usr/bin/env python3
"""Writes the golden files of kiln's GPT-2 tokenizer test with Hugging Face tokenizers 0.23, once;
the test needs neither Python nor a network.

    python3 -m venv /tmp/tok && /tmp/tok/bin/pip install "tokenizers>=0.23,<0.24" \\
        unicodedata2==16.0.0
    /tmp/tok/bin/python tools/make_gpt2_golden.py

It builds GPT-2's tokenizer.json with tools/make_gpt2_tokenizer.py and writes, in tests/data/bpe/,

  gpt2_tokenizer.tar.xz  that tokenizer.json, as tokenizers 0.23 saves it (CMake unpacks it
                         into the build folder at configure time)
  gpt2_golden.json       tokenizers' pieces (GPT-2's pre-tokenization) and ids of
                         "unicode": a text per script (and per group of characters) whose
                                    class changed between Unicode 14.0 and 16.0 (Kawi, CJK
                                    Extensions H and I, Nag Mundari, Kaktovik numerals, Garay,
                                    Todhri, Kirat Rai, Sunuwar, ...), each with contractions
                                    after its characters
                         "texts":   code, CJK, emoji, whitespace runs, contractions, the added
                                    token, and the text of a CJK indented with U+3000 that a
                                    block cut split wrongly ("中'r" | "e中")

Every encoding is checked to decode back to its text.
"""

import io
import json
import os
import sys
import tarfile
import tempfile
import unicodedata

import tokenizers
import unicodedata2
from tokenizers import Tokenizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_gpt2_tokenizer  # noqa: E402

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "bpe")
CLASSES = {"L": {"Lu", "Ll", "Lt", "Lm", "Lo"}, "N": {"Nd", "Nl", "No"}, "S": {"Zs", "Zl", "Zp"}}
STOP_WORDS = {"LETTER", "DIGIT", "SIGN", "NUMERAL", "HIEROGLYPH", "IDEOGRAPH", "CHARACTER",
              "VOWEL", "CONSONANT", "SYLLABLE"}


def char_class(module, cp):
    category = module.category(chr(cp))
    return next((name for name, cats in CLASSES.items() if category in cats), "O")


def script_groups():
    """Characters whose class differs between Python's Unicode 14.0 and unicodedata2's, grouped by
    the words that start their names (a script, or a block of ideographs)."""
    assert unicodedata.unidata_version == "14.0.0", unicodedata.unidata_version
    assert unicodedata2.unidata_version == "16.0.0", unicodedata2.unidata_version
    groups = {}
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF or char_class(unicodedata, cp) == char_class(unicodedata2, cp):
            continue
        words = []
        for word in unicodedata2.name(chr(cp)).split():
            if word.split("-")[0] in STOP_WORDS:
                break
            words.append(word)
        key = " ".join(words) + f" U+{cp >> 12:02X}xxx"
        groups.setdefault(key, []).append(cp)
    return groups


def unicode_texts():
    texts = []
    for key, cps in sorted(script_groups().items(), key=lambda kv: kv[1][0]):
        a, b, c = (chr(cps[i]) for i in (0, len(cps) // 2, -1))
        texts.append((key, f"x{a}'s {b}{c} {a}'re{b}'\u3000{c}1 {c}'ll."))
    return texts


TEXTS = [
    "Hello world",
    "It's what we'll do, they're sure I'm right; you've seen it, he'd said. DON'T 'S",
    "def f(x):\n    return x**2  # square\n\n\tif x != 0:\n\t\tpass\r\n",
    "int main() { std::vector<int> v{1, 2, 3}; return v[0] + 0x1F; }",
    "中文文本和数字，日本語のテキスト。한국어 텍스트 입니다. ภาษาไทย ๑๒๓",
    "Emoji: 😀 👍🏽 👨\u200d👩\u200d👧 🇫🇷 ❤️ done.",
    "   leading, trailing   \n\n\n   \t \u3000 \u00a0x  \u2028y \u0085z      ",
    "one<|endoftext|>two <|endoftext|><|endoftext|> three",
    "Numbers 12345 and 3.14159, 1,000,000; ١٢٣ ४५६ １２３ x² ½ Ⅻ",
    # The block cut of issue 52: CJK indented with U+3000, a contraction across the cut.
    "\u3000\u3000中文'r" + "e中文'll中文'" + "s\u3000\u3000中'" + "ve中文",
]


def main():
    with tempfile.TemporaryDirectory() as tmp:
        sys.argv = ["make_gpt2_tokenizer.py", tmp]
        make_gpt2_tokenizer.main()
        path = os.path.join(tmp, "tokenizer.json")
        tokenizer = Tokenizer.from_file(path)
        with open(path, "rb") as f:
            data = f.read()
    info = tarfile.TarInfo("tokenizer.json")
    info.size, info.mtime, info.mode = len(data), 0, 0o644
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:xz", format=tarfile.USTAR_FORMAT) as tar:
        tar.addfile(info, io.BytesIO(data))
    with open(os.path.join(HERE, "gpt2_tokenizer.tar.xz"), "wb") as f:
        f.write(buffer.getvalue())

    pre = tokenizer.pre_tokenizer
    symbol_byte = {s: b for b, s in make_gpt2_tokenizer.bytes_to_unicode().items()}

    def entry(text, name=None):
        ids = tokenizer.encode(text).ids
        assert tokenizer.decode(ids, skip_special_tokens=False) == text, text
        pieces = []
        if "<|endoftext|>" not in text:
            for symbols, _ in pre.pre_tokenize_str(text):
                pieces.append(bytes(symbol_byte[s] for s in symbols).decode("utf-8"))
            assert "".join(pieces) == text
        out = {"text": text, "pieces": pieces, "ids": ids}
        return {"name": name, **out} if name else out

    golden = {
        "tokenizers": tokenizers.__version__,
        "unicode": [entry(text, name) for name, text in unicode_texts()],
        "texts": [entry(text) for text in TEXTS],
    }
    with open(os.path.join(HERE, "gpt2_golden.json"), "w", encoding="utf-8") as f:
        json.dump(golden, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"{len(golden['unicode'])} Unicode texts, {len(TEXTS)} texts; tokenizers "
          f"{tokenizers.__version__}", file=sys.stderr)


if __name__ == "__main__":
    main()
