#!/usr/bin/env python3
"""Checks once that transformers loads kiln's export and records its logits, for
tests/lm/test_hugging_face.cpp (which compares kiln's logits with them and re-exports the same
checkpoint byte for byte; no Python at test time).

    build/apps/kiln-export --format hf --checkpoint tests/golden/hf_export/kiln_gpt2.safetensors \
        --out tests/golden/hf_export/gpt2
    /work/venv/bin/python tools/check_hf_export.py

tests/golden/hf_export/kiln_gpt2.safetensors is a kiln-trained GPT-2-family model (train_lm
--preset gpt2 --d-model 16 --heads 2 --layers 2 --ff 64 --max-seq-len 16, 30 Adam steps on
WikiText-2 with the tokenizer of tests/golden/hf_gpt2/a). Writes
tests/golden/hf_export/transformers_logits.safetensors: input_ids (2, 16) int64 and logits
(2, 16, vocab) float32, and the greedy continuation of the first 3 ids (generate()).
"""
import os

import torch
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerFast

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "golden", "hf_export")


def main():
    folder = os.path.join(HERE, "gpt2")
    model, info = AutoModelForCausalLM.from_pretrained(folder, output_loading_info=True)
    model.eval()
    print("loaded", type(model).__name__, "loading info", info)
    assert not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys",
                                     "error_msgs")), info
    tok = PreTrainedTokenizerFast(tokenizer_file=os.path.join(folder, "tokenizer.json"))
    text = "The quick brown fox jumps over the lazy dog."
    print("tokenizer.json in transformers:", tok(text)["input_ids"])
    gen = torch.Generator().manual_seed(7)
    ids = torch.randint(0, model.config.vocab_size, (2, model.config.n_positions), generator=gen)
    with torch.no_grad():
        logits = model(ids).logits.float().contiguous()
        greedy = model.generate(ids[:1, :3], max_length=model.config.n_positions,
                                do_sample=False, pad_token_id=model.config.eos_token_id)
    print("logits", tuple(logits.shape), "max |logit|", f"{logits.abs().max().item():.6f}")
    print("greedy", greedy.tolist()[0])
    save_file({"input_ids": ids, "logits": logits, "greedy": greedy.contiguous()},
              os.path.join(HERE, "transformers_logits.safetensors"))


if __name__ == "__main__":
    main()
