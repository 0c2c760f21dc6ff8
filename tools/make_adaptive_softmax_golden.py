#!/usr/bin/python3
"""Writes tests/golden/adaptive_softmax.safetensors: PyTorch's answers for kiln's tied adaptive softmax.

Run once with a python that has torch (no network, no GPU):
    /work/venv/bin/python tools/make_adaptive_softmax_golden.py

kiln's nn::AdaptiveSoftmax (nn/adaptive_softmax.h) ranks the words by frequency inside the module
(`order`: the vocabulary id of each rank) and ties the head's shortlist rows to the embedding:
head.weight = cat(E[order[:c0]], cluster_logits). This script copies those weights into
torch.nn.AdaptiveLogSoftmaxWithLoss (vocabulary 23, d 8, cutoffs [5, 12], div_value 2, no head
bias), feeds it the targets mapped to ranks, and stores under kiln's names:
  weights    embedding.weight (23, 8), adaptive.cluster_logits (2, 8),
             adaptive.clusters.<i>.projection, adaptive.clusters.<i>.output, adaptive.order (I64)
  batch      x (11, 8), targets (11) vocabulary ids (every cluster hit)
  answers    out.loss (), out.log_prob (11, 23) in vocabulary order,
             grad.x, grad.<weight name> for the loss (the embedding's gradient flows through the
             tie: only the shortlist words' rows are nonzero)
The test tests/nn/test_adaptive_softmax.cpp loads them with kiln's safetensors reader.
"""
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_golden import write_safetensors  # noqa: E402
OUT = os.path.join(HERE, "..", "tests", "golden", "adaptive_softmax.safetensors")
VOCAB, D, CUTOFFS, DIV, ROWS = 23, 8, [5, 12], 2.0, 11


def main():
    torch.manual_seed(7)
    module = torch.nn.AdaptiveLogSoftmaxWithLoss(D, VOCAB, CUTOFFS, div_value=DIV, head_bias=False)
    order = torch.randperm(VOCAB)
    rank = torch.empty_like(order)
    rank[order] = torch.arange(VOCAB)
    embedding = torch.nn.Parameter(torch.empty(VOCAB, D).uniform_(-0.5, 0.5))
    cluster_logits = torch.nn.Parameter(module.head.weight.detach()[CUTOFFS[0]:].clone())
    x = torch.randn(ROWS, D, requires_grad=True)
    # Ranks in the shortlist, both clusters, their edges.
    ranks = torch.tensor([0, 4, 5, 11, 12, 22, 3, 7, 15, 1, 20])
    targets = order[ranks]

    # The tie: the head's weight is computed from the embedding, not a parameter of its own.
    del module.head.weight
    module.head.weight = torch.cat([embedding[order[:CUTOFFS[0]]], cluster_logits])
    result = module(x, rank[targets])
    result.loss.backward()
    with torch.no_grad():
        log_prob = module.log_prob(x)[:, rank]  # column id = rank[id]

    tensors = {
        "embedding.weight": embedding.detach(),
        "adaptive.cluster_logits": cluster_logits.detach(),
        "adaptive.order": order,
        "x": x.detach(),
        "targets": targets,
        "out.loss": result.loss.detach(),
        "out.log_prob": log_prob,
        "grad.x": x.grad,
        "grad.embedding.weight": embedding.grad,
        "grad.adaptive.cluster_logits": cluster_logits.grad,
    }
    for i, tail in enumerate(module.tail):
        for name, linear in (("projection", tail[0]), ("output", tail[1])):
            key = f"adaptive.clusters.{i}.{name}"
            tensors[key] = linear.weight.detach()
            tensors["grad." + key] = linear.weight.grad
    arrays = {k: v.numpy().astype(np.int64 if v.dtype == torch.int64 else np.float32)
              for k, v in tensors.items()}
    metadata = {"vocab": str(VOCAB), "d_model": str(D), "cutoffs": ",".join(map(str, CUTOFFS)),
                "div_value": str(DIV), "torch": torch.__version__}
    write_safetensors(OUT, arrays, metadata)
    print(f"wrote {os.path.normpath(OUT)}: loss {result.loss.item():.6f}")


if __name__ == "__main__":
    main()
