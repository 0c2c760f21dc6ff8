#!/usr/bin/env python3
"""Writes the golden files of kiln's byte-level BPE tests (tests/data/bpe/) with Hugging Face
tokenizers, once; the tests need neither Python nor a network.

    python3 -m venv /tmp/tok && /tmp/tok/bin/pip install tokenizers
    build/apps/kiln-prepare --train tests/data/bpe/train.txt --valid tests/data/bpe/sample.txt \
        --test tests/data/bpe/sample.txt --vocab-size 600 --out /tmp/kiln-bpe
    cp /tmp/kiln-bpe/tokenizer.json tests/data/bpe/kiln_tokenizer.json
    /tmp/tok/bin/python tools/make_tokenizer_golden.py

(run it once without kiln_tokenizer.json to write train.txt and sample.txt first). It writes

  sample.txt, train.txt    the texts: sample.txt holds Latin, Greek, Cyrillic, Arabic, Hebrew,
                           Devanagari, Thai, CJK and Hangul, other scripts' digits (Arabic-Indic,
                           Devanagari, fullwidth, superscripts, Roman numerals), combining marks,
                           emoji (with ZWJ and skin tones), U+00A0, U+3000 and other Unicode
                           spaces, contractions, trailing spaces, tabs and CRLF line ends
  cases.json               short edge cases (lists of strings)
  hf_tokenizer.json        a byte-level BPE of 1,000 tokens that tokenizers trains on train.txt
  hf_golden.json           its ids of sample.txt and of every case, by tokenizers
  kiln_golden.json         the ids of the same texts by tokenizers with kiln_tokenizer.json, the
                           BPE that kiln trains on train.txt (the test checks kiln still trains
                           exactly that file)

Every encoding is checked to decode back to its text.
"""

import json
import os
import sys

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "bpe")

SAMPLE = (
    "The quick brown fox can't jump; it's what they'd say, isn't it? We'll see: you're "
    "right, I've done it, I'm sure.\r\n"
    "CAPS'S and 'quoted' and O'Neil's 'll 've 're 'd 'm 't 's.\r\n"
    "Numbers 12345 and 3.14159, 1,000,000; 2024-05-01.   \r\n"
    "Trailing spaces here   \n"
    "\ttabs\tand  double  spaces\n"
    "Ελληνικά κείμενα και αριθμοί. Русский текст с цифрами 42.\n"
    "العربية: ٠١٢٣٤٥٦٧٨٩ و עברית טקסט.\n"
    "हिन्दी पाठ और अंक ०१२३४५६७८९।\n"
    "ภาษาไทย ๑๒๓ และ 中文文本和数字，日本語のテキスト。한국어 텍스트 입니다.\n"
    "Fullwidth digits １２３ and superscripts x² y³ ½ and Roman Ⅻ ⅻ.\n"
    "Combining: e\u0301 a\u0300 n\u0303 cafe\u0301 Zoe\u0308 o\u0302\u0323.\n"
    "Emoji: 😀 👍🏽 👨‍👩‍👧 🇫🇷 ❤️ done.\n"
    "No-break\u00a0space and\u00a0\u00a0two, ideographic\u3000space\u3000\u3000twice, "
    "thin\u2009space, en\u2002space, narrow\u202fnbsp.\n"
    "Line\u2028separator and paragraph\u2029separator and NEL\u0085here.\n"
    "Symbols: @#$%^&*()_+-=[]{}|\\:;\"<>,./?~` — “quotes” «guillemets» …\n"
    "\n"
    "   leading spaces and a blank line above\r\n"
    "last line without a newline   "
)

CASES = [
    "", " ", "  ", "\n", "\n\n\n", "\r\n", "a", " a", "  a", "a ", "a  ", "a \n b",
    "'s", "'S", "x's", "x'S", "''s", "don't", " 'll", "'ll've", "it's'", "hello world",
    "3.14", " 42", "x\u00a0\u00a0y", "x\u3000\u3000y", "\u3000", "a\u0301", "\u0301a",
    "😀😀 ok", "١٢٣ abc", "a\tb\t\tc", "ends with space ", "mixed 日本語 text 123",
    "   \n   \n   x", "!!!???", "a.b,c;d", "tab\t\n", "e\u0301\u0301\u0301",
]

TRAIN_TEXT = "\n".join([
    "The history of the language model begins with counting words and their neighbours.",
    "A model that predicts the next token can write text, and it learns what it reads.",
    "It's a long way from n-grams to transformers, but they'd say the idea is the same.",
    "We'll train a small vocabulary on this text: merges of the most frequent pairs.",
    "Numbers like 1984, 2001 and 3.14159 appear, and so do dates such as 2024-05-01.",
    "Ελληνικά: η γλώσσα έχει μακρά ιστορία και πολλά κείμενα. Ελληνικά κείμενα.",
    "Русский: язык и текст, слова и цифры. Русский текст с цифрами и словами.",
    "العربية: لغة جميلة، والأرقام ٠١٢٣٤٥٦٧٨٩ مكتوبة هنا. العربية والأرقام.",
    "עברית: שפה עתיקה וטקסט חדש. עברית טקסט.",
    "हिन्दी: भाषा और पाठ, अंक ०१२३४५६७८९ भी। हिन्दी पाठ और अंक।",
    "ภาษาไทย: ข้อความและตัวเลข ๑๒๓ ภาษาไทย ข้อความ",
    "中文文本和数字，中文文本。日本語のテキスト、日本語の文章。한국어 텍스트 입니다, 한국어.",
    "Combining marks: cafe\u0301 cafe\u0301 Zoe\u0308 Zoe\u0308 n\u0303 n\u0303.",
    "Emoji: 😀 😀 👍🏽 👍🏽 ❤️ ❤️ and more emoji 😀.",
    "Spaces:\u00a0no-break\u00a0spaces and ideographic\u3000spaces\u3000here.",
] * 40) + "\n"


def encode_checked(tokenizer, text):
    ids = tokenizer.encode(text, add_special_tokens=False).ids
    back = tokenizer.decode(ids, skip_special_tokens=False)
    if back != text:
        sys.exit(f"make_tokenizer_golden: {text!r} decodes to {back!r}")
    return ids


def golden(tokenizer, sample):
    return {"sample": encode_checked(tokenizer, sample),
            "cases": [encode_checked(tokenizer, c) for c in CASES]}


def write(name, text):
    with open(os.path.join(HERE, name), "w", encoding="utf-8", newline="") as f:
        f.write(text)


def main():
    os.makedirs(HERE, exist_ok=True)
    write("sample.txt", SAMPLE)
    write("train.txt", TRAIN_TEXT)
    write("cases.json", json.dumps(CASES, ensure_ascii=False, indent=0) + "\n")

    hf = Tokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    hf.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1000, min_frequency=1, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    hf.train([os.path.join(HERE, "train.txt")], trainer)
    hf.save(os.path.join(HERE, "hf_tokenizer.json"))
    hf = Tokenizer.from_file(os.path.join(HERE, "hf_tokenizer.json"))
    write("hf_golden.json", json.dumps(golden(hf, SAMPLE)) + "\n")

    kiln_path = os.path.join(HERE, "kiln_tokenizer.json")
    if not os.path.exists(kiln_path):
        print("make_tokenizer_golden: no kiln_tokenizer.json yet; make it with kiln-prepare "
              "(see the top of this file) and run again")
        return
    kiln = Tokenizer.from_file(kiln_path)
    write("kiln_golden.json", json.dumps(golden(kiln, SAMPLE)) + "\n")
    print("make_tokenizer_golden: wrote the golden files in", os.path.normpath(HERE))


if __name__ == "__main__":
    main()
