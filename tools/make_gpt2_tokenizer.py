#!/usr/bin/env python3
"""Writes GPT-2's genuine tokenizer.json, as Hugging Face tokenizers saves it, offline but for one
pip download: GPT-2's BPE ranks come from the gpt2.tiktoken that openai-whisper bundles.

    python3 -m venv /tmp/tok && /tmp/tok/bin/pip install "tokenizers>=0.23,<0.24"
    /tmp/tok/bin/python tools/make_gpt2_tokenizer.py OUT_DIR     # writes OUT_DIR/tokenizer.json

gpt2.tiktoken lists GPT-2's 50,256 byte-level tokens in rank order, rank = GPT-2's id; id 50,256
is "<|endoftext|>". A token of rank r > 255 is the merge of the two tokens that BPE with the
ranks below r leaves of its bytes, so the merges are recovered in rank order: the 50,000 of
GPT-2's merges.txt. The file is put together as transformers' GPT2Converter does
(tokenizers.models.BPE with continuing_subword_prefix and end_of_word_suffix "", ByteLevel
pre-tokenizer, decoder and post-processor), and saved by tokenizers. Where transformers is
installed, GPT2TokenizerFast built from the same vocab.json and merges.txt must encode every
probe text alike, or the script fails. The sha256 of the asset is checked.
"""

import base64
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile

from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors

WHISPER = "openai-whisper==20250625"
ASSET = "whisper/assets/gpt2.tiktoken"
ASSET_SHA256 = "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"  # 2025-06-25
EOT = "<|endoftext|>"


def bytes_to_unicode():
    """GPT-2's printable symbol for each byte (data/byte_level.h)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(
        range(0xAE, 0xFF + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def read_asset():
    with tempfile.TemporaryDirectory() as tmp:
        pip = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", tmp, WHISPER]
        subprocess.run(pip, check=True)
        (archive,) = os.listdir(tmp)
        with tarfile.open(os.path.join(tmp, archive)) as tar:
            (member,) = [m for m in tar.getmembers() if m.name.endswith("/" + ASSET)]
            return tar.extractfile(member).read()


def bpe_parts(token, ranks, max_rank):
    """The parts BPE with the ranks below max_rank leaves of token's bytes."""
    parts = [bytes([b]) for b in token]
    while True:
        best = None
        for i in range(len(parts) - 1):
            rank = ranks.get(parts[i] + parts[i + 1])
            if rank is not None and rank < max_rank and (best is None or rank < best[0]):
                best = (rank, i)
        if best is None:
            return parts
        i = best[1]
        parts[i:i + 2] = [parts[i] + parts[i + 1]]


def gpt2_vocab_and_merges(asset):
    ranks = {}
    for line in asset.decode("ascii").splitlines():
        token, rank = line.split()
        ranks[base64.b64decode(token)] = int(rank)
    assert sorted(ranks.values()) == list(range(len(ranks))) and len(ranks) == 50256
    symbol = bytes_to_unicode()
    spell = lambda b: "".join(symbol[x] for x in b)
    vocab = {spell(token): rank for token, rank in ranks.items()}
    vocab[EOT] = len(ranks)
    merges = []
    for token, rank in sorted(ranks.items(), key=lambda kv: kv[1]):
        if len(token) == 1:
            assert rank < 256
            continue
        parts = bpe_parts(token, ranks, rank)
        assert len(parts) == 2, (token, parts)
        merges.append((spell(parts[0]), spell(parts[1])))
    assert len(merges) == 50000
    return vocab, merges


def build(vocab, merges):
    tokenizer = Tokenizer(
        models.BPE(vocab=vocab, merges=merges, dropout=None, continuing_subword_prefix="",
                   end_of_word_suffix="", fuse_unk=False))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    tokenizer.add_special_tokens([AddedToken(EOT, special=True, normalized=True)])
    return tokenizer


def check_against_transformers(tokenizer, vocab, merges, texts):
    try:
        from transformers import GPT2TokenizerFast
    except ImportError:
        print("transformers not installed: GPT2TokenizerFast not compared", file=sys.stderr)
        return
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "vocab.json"), "w", encoding="utf-8") as f:
            json.dump(vocab, f, ensure_ascii=False)
        with open(os.path.join(tmp, "merges.txt"), "w", encoding="utf-8") as f:
            f.write("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges))
        fast = GPT2TokenizerFast(os.path.join(tmp, "vocab.json"), os.path.join(tmp, "merges.txt"))
        for text in texts:
            ours = tokenizer.encode(text).ids
            theirs = fast(text)["input_ids"]
            assert ours == theirs, (text, ours, theirs)
    print(f"GPT2TokenizerFast encodes all {len(texts)} texts alike", file=sys.stderr)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_gpt2_tokenizer.py OUT_DIR  (writes OUT_DIR/tokenizer.json)")
    out_dir = sys.argv[1]
    asset = read_asset()
    digest = hashlib.sha256(asset).hexdigest()
    if digest != ASSET_SHA256:
        sys.exit(f"{ASSET} of {WHISPER} has sha256 {digest}, expected {ASSET_SHA256}")
    vocab, merges = gpt2_vocab_and_merges(asset)
    tokenizer = build(vocab, merges)
    texts = ["Hello world", " Hello  world\n\n", "It's what we'll do, they're sure.",
             "def f(x):\n    return x**2  # square\n", "中文文本和数字，日本語のテキスト。",
             "\u3000\u3000中'ре中", "Emoji: 😀 👍🏽 👨\u200d👩\u200d👧", "one" + EOT + "two"]
    assert tokenizer.encode("Hello world").ids == [15496, 995]
    check_against_transformers(tokenizer, vocab, merges, texts)
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "tokenizer.json")
    tokenizer.save(path + ".tmp")
    os.replace(path + ".tmp", path)
    print(f"wrote {path} ({os.path.getsize(path)} bytes; asset sha256 {digest})", file=sys.stderr)


if __name__ == "__main__":
    main()
