#!/usr/bin/env python3
"""Hugging Face tokenizers' encoding speed, as bench_tokenizer measures kiln's: the text repeated
to at least --mb MB, encoded with tokenizer.json by encode_batch over pieces cut where byte-level
BPE always cuts (between an ASCII non-space and an ASCII space: the ids equal the whole text's),
best of --repeats; threads: RAYON_NUM_THREADS (compare_tokenizers.sh sets it).

    RAYON_NUM_THREADS=2 python3 bench/tokenizers_encode.py --tokenizer T.json --text train.txt
"""

import argparse
import os
import time

from tokenizers import Tokenizer


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokenizer", required=True)
    parser.add_argument("--text", required=True)
    parser.add_argument("--mb", type=float, default=50)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--piece-bytes", type=int, default=65536)
    args = parser.parse_args()
    with open(args.text, "rb") as f:
        raw = f.read()
    big = raw
    while len(big) < args.mb * 1e6:
        big += raw
    text = big.decode("utf-8")
    tokenizer = Tokenizer.from_file(args.tokenizer)
    # Pieces of about piece_bytes characters, each cut between an ASCII non-space and an ASCII
    # space (no piece of the pre-tokenization holds such a pair).
    pieces, start = [], 0
    while start < len(text):
        cut = start + args.piece_bytes
        while cut < len(text) and not (text[cut] in " \t\n\r\v\f" and "!" <= text[cut - 1] <= "~"):
            cut += 1
        pieces.append(text[start:cut])
        start = cut
    best, tokens = float("inf"), 0
    for _ in range(args.repeats):
        begin = time.perf_counter()
        encodings = tokenizer.encode_batch(pieces, add_special_tokens=False)
        best = min(best, time.perf_counter() - begin)
        tokens = sum(len(e.ids) for e in encodings)
    threads = os.environ.get("RAYON_NUM_THREADS", "all")
    print(f"tokenizers encode: {len(big) / 1e6:.1f} MB, {tokens} tokens, {threads} threads: "
          f"best {best:.3f} s = {len(big) / 1e6 / best:.1f} MB/s ({len(pieces)} pieces)")


if __name__ == "__main__":
    main()
