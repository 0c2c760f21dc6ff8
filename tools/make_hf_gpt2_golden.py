#!/usr/bin/env python3
"""Writes tests/golden/hf_gpt2/<case>/: small random-weight GPT2LMHeadModel folders, as
transformers saves them, with transformers' own answers, for tests/lm/test_hugging_face.cpp.

Run once (no network, no GPU), with transformers 4.40 and PyTorch:
    /work/venv/bin/python tools/make_hf_gpt2_golden.py

Each case is a folder kiln reads as a checkpoint (lm/hugging_face.h) plus expected.safetensors:
  input_ids (1, T) int64      random ids, T = n_positions
  logits    (1, T, vocab) f32 GPT2LMHeadModel(input_ids).logits, in float32 from the weights as
                              stored (F16/BF16 weights widened), so kiln's bound is float32's
  prompt    (1, 3) int64      the start of greedy decoding
  greedy    (1, n_positions) int64   prompt + greedy continuation up to n_positions tokens
The cases differ in heads, layers, n_positions, n_inner, activation, storage dtype, tensor
names (with or without "transformer.", lm_head present, attn.bias buffers) and tokenizer files
(tokenizer.json, or vocab.json + merges.txt); every vocabulary has 263 tokens (not a multiple
of 8): a byte-level BPE trained by `tokenizers` on a few sentences, "<|endoftext|>" among them.
"""
import json
import os
import shutil
import tempfile

import torch
from safetensors.torch import save_file
from tokenizers import ByteLevelBPETokenizer
from transformers import GPT2Config, GPT2LMHeadModel

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "golden", "hf_gpt2")
TEXT = [
    "The quick brown fox jumps over the lazy dog. " * 4,
    "Hugging Face folders in and out of kiln, with exact logits. " * 4,
    "A framework that only trains from scratch is an island. " * 4,
]
VOCAB = 263

CASES = {
    # name: config fields, storage dtype, tensor naming, tokenizer files
    "a": dict(cfg=dict(n_embd=16, n_head=2, n_layer=2, n_positions=16,
                       activation_function="gelu_new"),
              dtype=torch.float32, names="save_pretrained", tokenizer="json"),
    "b": dict(cfg=dict(n_embd=24, n_head=3, n_layer=3, n_positions=12,
                       activation_function="gelu_pytorch_tanh"),
              dtype=torch.float16, names="bare_with_head_and_buffers", tokenizer="vocab_merges"),
    "c": dict(cfg=dict(n_embd=32, n_head=4, n_layer=1, n_positions=20, n_inner=48,
                       activation_function="gelu_new"),
              dtype=torch.bfloat16, names="save_pretrained", tokenizer="json"),
}


def train_tokenizer(tmp):
    tok = ByteLevelBPETokenizer()
    files = []
    for i, t in enumerate(TEXT):
        p = os.path.join(tmp, f"t{i}.txt")
        with open(p, "w") as f:
            f.write(t)
        files.append(p)
    tok.train(files, vocab_size=VOCAB, min_frequency=1, special_tokens=["<|endoftext|>"],
              show_progress=False)
    assert tok.get_vocab_size() == VOCAB, tok.get_vocab_size()
    return tok


def main():
    torch.manual_seed(55)
    tmp = tempfile.mkdtemp()
    tok = train_tokenizer(tmp)
    eot = tok.token_to_id("<|endoftext|>")
    for name, case in CASES.items():
        out = os.path.join(ROOT, name)
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        cfg = GPT2Config(vocab_size=VOCAB, bos_token_id=eot, eos_token_id=eot, resid_pdrop=0.0,
                         embd_pdrop=0.0, attn_pdrop=0.0, **case["cfg"])
        model = GPT2LMHeadModel(cfg).eval()
        # Larger weights than GPT-2's init (0.02) so the logits are not all near 0.
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p) * 0.2)
            model.to(case["dtype"]).float()  # the stored weights, widened
        if case["names"] == "save_pretrained":
            model.to(case["dtype"]).save_pretrained(out, safe_serialization=True)
            model.float()
        else:
            # As an older save: no "transformer." prefix, the causal-mask buffers, lm_head too.
            state = {k[len("transformer."):] if k.startswith("transformer.") else k:
                     v.to(case["dtype"]).contiguous() for k, v in model.state_dict().items()}
            state["lm_head.weight"] = state["wte.weight"].clone()
            n = cfg.n_positions
            for layer in range(cfg.n_layer):
                state[f"h.{layer}.attn.bias"] = torch.tril(torch.ones(n, n)).view(1, 1, n, n)
                state[f"h.{layer}.attn.masked_bias"] = torch.tensor(-1e4)
            save_file(state, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
            cfg.save_pretrained(out)
        if case["tokenizer"] == "json":
            tok.save(os.path.join(out, "tokenizer.json"))
        else:
            tok.save_model(out)  # vocab.json, merges.txt
        gen = torch.Generator().manual_seed(len(name) + ord(name))
        T = cfg.n_positions
        ids = torch.randint(0, VOCAB, (1, T), generator=gen)
        with torch.no_grad():
            logits = model(ids).logits.float().contiguous()
            prompt = ids[:, :3].clone()
            greedy = prompt
            while greedy.shape[1] < T:  # GPT-2 cannot go past n_positions
                nxt = model(greedy).logits[:, -1].argmax(-1, keepdim=True)
                greedy = torch.cat([greedy, nxt], 1)
        save_file({"input_ids": ids, "logits": logits, "prompt": prompt, "greedy": greedy},
                  os.path.join(out, "expected.safetensors"))
        print(f"{name}: {json.dumps(case['cfg'])} {case['dtype']} max|logit| "
              f"{logits.abs().max().item():.4f} greedy {greedy.tolist()[0]}")
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
