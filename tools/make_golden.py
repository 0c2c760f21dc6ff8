#!/usr/bin/python3
"""Writes tests/golden/tiny_lm.safetensors: PyTorch's answers for a tiny TransformerLM.

Run once with Debian's python3-torch (no network, no GPU):
    /usr/bin/python3 tools/make_golden.py [--torch-ref bench/torch_ref.py]

It builds bench/torch_ref.py's model at a tiny size (vocab 50, d_model 16, 2 heads,
2 layers, ff 32, T 8, B 2, dropout 0) and stores, under kiln's parameter names
(tools/kiln_names.py):
  weights        <name>                 the initial parameters
  inputs/targets batch.inputs, batch.targets   (B, T) int64
  logits         out.logits             (B, T, vocab)
  loss           out.loss               () mean cross-entropy
  gradients      grad.<name>            d loss / d parameter
  Adam losses    adam.losses            (5,) the loss at each of 5 Adam steps (lr 1e-2,
                                        betas (0.9, 0.999), eps 1e-8, global clip 1.0), taken
                                        before each step's update
The test tests/nn/test_golden.cpp loads these with kiln's own safetensors reader.
"""
import argparse
import importlib.util
import json
import os
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from kiln_names import torch_to_kiln  # noqa: E402

VOCAB, D_MODEL, HEADS, LAYERS, FF, T, B = 50, 16, 2, 2, 32, 8, 2
ADAM = dict(lr=1e-2, betas=(0.9, 0.999), eps=1e-8)
CLIP = 1.0
STEPS = 5


def load_torch_ref(path):
    spec = importlib.util.spec_from_file_location("torch_ref", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_safetensors(path, tensors, metadata):
    """A minimal safetensors writer: 8-byte dtypes first, header padded with spaces to 8."""
    dtype_names = {np.dtype("<f4"): "F32", np.dtype("<f8"): "F64", np.dtype("<i8"): "I64"}
    order = sorted(tensors, key=lambda n: (tensors[n].dtype.itemsize != 8, n))
    header, blobs, offset = {"__metadata__": metadata}, [], 0
    for name in order:
        array = np.array(tensors[name], order="C")  # ascontiguousarray would make 0-d arrays 1-d
        data = array.astype(array.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": dtype_names[array.dtype], "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--torch-ref", default=os.path.join(HERE, "..", "bench", "torch_ref.py"))
    ap.add_argument("--out", default=os.path.join(HERE, "..", "tests", "golden", "tiny_lm.safetensors"))
    args = ap.parse_args()

    ref = load_torch_ref(args.torch_ref)
    torch.manual_seed(20261129)
    model = ref.TransformerLM(VOCAB, D_MODEL, HEADS, LAYERS, FF, 0.0)
    inputs = torch.randint(0, VOCAB, (B, T), dtype=torch.int64)
    targets = torch.randint(0, VOCAB, (B, T), dtype=torch.int64)

    tensors = {torch_to_kiln(n): p.detach().numpy().copy() for n, p in model.named_parameters()}
    tensors["batch.inputs"] = inputs.numpy()
    tensors["batch.targets"] = targets.numpy()

    logits = model(inputs)
    loss = F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))
    loss.backward()
    tensors["out.logits"] = logits.detach().numpy()
    tensors["out.loss"] = np.array(loss.item(), dtype=np.float32)
    for n, p in model.named_parameters():
        tensors["grad." + torch_to_kiln(n)] = p.grad.numpy().copy()

    opt = torch.optim.Adam(model.parameters(), **ADAM)
    losses = []
    for _ in range(STEPS):
        opt.zero_grad(set_to_none=True)
        step_loss = F.cross_entropy(model(inputs).view(-1, VOCAB), targets.view(-1))
        step_loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        opt.step()
        losses.append(step_loss.item())
    tensors["adam.losses"] = np.array(losses, dtype=np.float64)

    config = {"vocab": VOCAB, "d_model": D_MODEL, "heads": HEADS, "kv_heads": HEADS, "layers": LAYERS,
              "ff": FF, "max_seq_len": 64, "dropout": 0.0, "attn_dropout": 0.0,
              "activation": "relu", "norm": "post", "position": "sinusoidal"}
    metadata = {"config": json.dumps(config), "torch": torch.__version__,
                "adam": json.dumps({**ADAM, "clip": CLIP, "steps": STEPS}),
                "made_by": "tools/make_golden.py"}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    write_safetensors(args.out, tensors, metadata)
    print(f"wrote {args.out}: {len(tensors)} tensors, loss {loss.item():.6f}, adam losses {losses}")


if __name__ == "__main__":
    main()
