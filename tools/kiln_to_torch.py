#!/usr/bin/python3
"""Loads a kiln TransformerLM checkpoint into bench/torch_ref.py's model and prints
its perplexity, computed by torch_ref.py's own evaluate (the headline protocol).

    /usr/bin/python3 tools/kiln_to_torch.py runs/lm.best.safetensors --data datasets/wikitext-2

It reads the file with tools/check_safetensors.py's checks, rebuilds the model from the config
in the metadata, maps kiln's tensor names to torch_ref.py's (tools/kiln_names.py), checks that
the vocabulary in the checkpoint is the corpus's (same words in the same order), and evaluates
the valid and test splits with batch 10 and the training T. Matching perplexities show that a
kiln checkpoint means the same model in PyTorch. Needs Debian's python3-torch and numpy.
"""
import argparse
import importlib.util
import json
import math
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from check_safetensors import Invalid, read  # noqa: E402
from kiln_names import kiln_to_torch  # noqa: E402


def load_torch_ref(path):
    spec = importlib.util.spec_from_file_location("torch_ref", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def as_torch(entry):
    """A tensor of check_safetensors.read's (dtype, shape, flat values)."""
    dtype, shape, values = entry
    torch_dtype = {"F32": torch.float32, "F64": torch.float64, "I64": torch.int64}[dtype]
    return torch.frombuffer(bytearray(values.tobytes()), dtype=torch_dtype).reshape(shape).clone()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoint")
    ap.add_argument("--data", default=os.environ.get("KILN_DATA", "datasets/wikitext-2"))
    ap.add_argument("--torch-ref", default=os.path.join(HERE, "..", "bench", "torch_ref.py"))
    ap.add_argument("--seq-len", type=int, default=0, help="evaluation T (default: the checkpoint's training T)")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    try:
        metadata, tensors, _, _ = read(args.checkpoint)
    except (Invalid, OSError) as e:
        sys.exit(f"kiln_to_torch: {args.checkpoint}: {e}")
    config = json.loads(metadata["config"])
    for key, supported in (("activation", "relu"), ("norm", "post"), ("position", "sinusoidal")):
        if config[key] != supported:
            sys.exit(f"kiln_to_torch: torch_ref.py has only {key} {supported}, the checkpoint has {config[key]}")
    if config["kv_heads"] != config["heads"]:
        sys.exit("kiln_to_torch: torch_ref.py has no grouped-query attention (kv_heads != heads)")
    seq_len = args.seq_len or int(json.loads(metadata.get("train", "{}")).get("seq_len", 64))

    ref = load_torch_ref(args.torch_ref)
    # The adaptive softmax (docs/adaptive-softmax.md): its cutoffs and order rebuild the module.
    cutoffs = [int(c) for c in config.get("adaptive_softmax", "none").split(",") if c != "none"]
    order = as_torch(tensors["adaptive.order"]) if cutoffs else None
    model = ref.TransformerLM(config["vocab"], config["d_model"], config["heads"], config["layers"],
                              config["ff"], 0.0, cutoffs=cutoffs,
                              div=float(config.get("adaptive_div", 4.0)), order=order,
                              adaptive_input=config.get("input", "embedding") == "adaptive")
    state = {kiln_to_torch(name): as_torch(entry)
             for name, entry in tensors.items()
             if not name.startswith("optim.") and name != "adaptive.order"}
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [m for m in missing if not m.endswith("pe")]  # the positional table is a buffer
    if missing or unexpected:
        sys.exit(f"kiln_to_torch: missing {missing}, unexpected {unexpected}")

    corpus = ref.Corpus(args.data)
    words = metadata["vocab"].split("\n")
    if words != corpus.dictionary.idx2word:
        sys.exit("kiln_to_torch: the checkpoint's vocabulary differs from the corpus's")
    print(f"torch_ref.py model with kiln weights: {sum(p.numel() for p in model.parameters()):,} "
          f"parameters, T {seq_len}")
    for split in ("valid", "test"):
        data = ref.batchify(getattr(corpus, split), 10)
        loss = ref.evaluate(model, data, seq_len)
        print(f"{split} ppl {math.exp(loss):.2f} (PyTorch, loss {loss:.4f})")


if __name__ == "__main__":
    main()
