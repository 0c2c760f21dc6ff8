#!/usr/bin/python3
"""The differential test of kiln against PyTorch (docs/differential-testing.md).

    /usr/bin/python3 tools/differential.py run --seed 1 --count 5000
        has build/tests/differential/kiln_differential generate the cases with kiln's answers,
        replays each in PyTorch (Debian's python3-torch 1.13) and reports every disagreement
        reduced to a minimal case, and the counts per op family; exit 1 on a disagreement that
        is not a documented semantic difference (DOCUMENTED below).
    /usr/bin/python3 tools/differential.py golden --seed 7 --count 20000
        writes tests/differential/golden/corpus.jsonl: cases PyTorch and kiln agree on, with
        PyTorch's answers, replayed by CTest without PyTorch (kiln_differential check).
    --families a,b restricts either to some families; --kiln PATH names the program.

Each case (tests/differential/interpret.h) is replayed three ways:
  reference  float64 from the inputs (bf16 and float32 inputs are exact in float64);
  native     in the dtypes kiln computes each op in, as PyTorch computes there;
  local      each node alone, in float64 and natively, on kiln's values of its arguments.
A node's value must match its local reference within the op's tolerance (node_tolerance), every
gradient its end-to-end reference within the chain's (term_magnitudes where the plain bound
misses); on top of either an element may differ from the float64 answer by up to 4 times
PyTorch's own error in that dtype (|native - reference|): kiln is held to PyTorch's accuracy, not
beyond it. NaN must meet NaN, an infinity the same infinity. A bad call must raise in both, at
the same node. docs/differential-testing.md states the tolerances and the documented semantic
differences (DOCUMENTED, DOCUMENTED_VALUES below).
"""
import argparse
import collections
import json
import math
import os
import subprocess
import sys
import tempfile

import torch
import torch.nn.functional as F

torch.set_num_threads(1)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_KILN = os.path.join(REPO, "build", "tests", "differential", "kiln_differential")
GOLDEN = os.path.join(REPO, "tests", "differential", "golden", "corpus.jsonl")

# Bad calls kiln refuses and PyTorch accepts, by the generator's "why": each a documented
# semantic difference (docs/differential-testing.md), never a wrong value on valid input.
DOCUMENTED = {
    "mixed_dtypes": "kiln has no implicit promotion between float32 and float64 (DESIGN: a "
                    "mixture is an error, convert with .to); PyTorch promotes",
    "int64_arithmetic": "kiln's int64 takes factories, views, copies, comparisons and indexing "
                        "only; PyTorch computes on integers",
    "int64_input": "kiln's arithmetic, reductions, activations and dropout refuse int64; "
                   "PyTorch computes (or promotes to float)",
    "mean_of_no_elements": "the mean of no elements is undefined: kiln raises, PyTorch gives NaN",
    "every_target_ignored": "a loss over no counted targets is undefined: kiln raises, PyTorch "
                            "gives NaN",
    "zero_dim_input": "max and softmax along a dim of a 0-dim tensor: kiln raises (there is no "
                      "dim), PyTorch treats the scalar as one element",
    "nonpositive_eps": "layer_norm's eps must be > 0 in kiln (a constant row would divide by "
                       "zero); PyTorch accepts 0",
    "dropout_p_one": "dropout with p = 1 scales by 1 / (1 - p) = inf in kiln's inverted "
                     "dropout: kiln raises, PyTorch returns zeros",
    "linear_input_not_2d": "kiln's linear takes x (N, in); PyTorch's any (.., in)",
    "d_head_above_256": "kiln's tiled attention kernels take d_head <= 256; PyTorch's "
                        "composition has no limit",
    # kiln's own ops, which PyTorch composes: the composition runs where kiln's op refuses.
    "fewer_keys_than_queries": "causal_softmax needs T_k >= T_q + offset (queries are the last "
                               "T_q of the keys); the composed mask is defined anyway",
    "offset_past_the_keys": "as fewer_keys_than_queries",
    "more_queries_than_keys": "causal_attention_heads needs T_k >= T_q, as causal_softmax",
    "cannot_reduce": "sum_to's target must be reachable by summing broadcast dims",
}

# Documented differences in values, by id: each has a test pinning kiln's answer.
DOCUMENTED_VALUES = {
    "non_finite_order": "where infinities meet or an intermediate overflows the dtype, both "
                        "answers are non-finite but which non-finite value comes out (NaN, inf "
                        "or -inf) depends on the order of the operations: an FMA that keeps "
                        "a product exact, an accumulation order, a fused backward's grouping",
    "fused_range": "the fused ops keep unnormalised intermediates that leave the dtype's range "
                   "before PyTorch's compositions do, or meet NaN and inf in another order: "
                   "attention's scores Q K^T and its running sum of exp(S - m) Z V (up to "
                   "T_k / (1 - p) max |V|), D = rowsum(dY * Y) from the output (FlashAttention-2); "
                   "linear_cross_entropy's P'' W and P''^T X (P'' up to V), also inside "
                   "adaptive_softmax_loss. With operands within those factors of the largest "
                   "finite value, or not finite, an element that is finite in one is inf or "
                   "NaN in the other",
    "gradient_range": "a gradient whose chain-rule terms pass float32's largest value on the way "
                      "(a large factor met first in the backward pass, a smaller one later) is "
                      "+-inf in float32 and bf16 cases, as float32 arithmetic gives, where the "
                      "float64 reference is finite (tests/core/test_edge_semantics.cpp)",
    "ignored_row_not_finite": "a cross_entropy or linear_cross_entropy row whose target is "
                              "ignore_index gets exactly 0 gradient in kiln, even when its "
                              "logits hold NaN or infinities; PyTorch multiplies that row's "
                              "softmax by 0 and gives NaN there "
                              "(tests/core/test_edge_semantics.cpp)",
    "causal_mask_after_softmax": "causal_softmax and attention give a masked key exactly 0 "
                                 "probability and gradient, also in a row whose visible "
                                 "scores are all -inf or hold NaN (then NaN where visible); "
                                 "softmax(where(mask, S, -inf)) is NaN in the whole row "
                                 "(core/ops/softmax.h, tests/core/test_edge_semantics.cpp)",
}

EPS = {"f64": 2.0 ** -52, "f32": 2.0 ** -23, "bf16": 2.0 ** -7}
# The smallest normal number of each dtype: below it kiln's vectorised exponentials flush to 0
# where the C library keeps a subnormal.
TINY = {"f64": 2.2250738585072014e-308, "f32": 1.1754943508222875e-38,
        "bf16": 1.1754943508222875e-38}
NATIVE = {"f64": torch.float64, "f32": torch.float32, "bf16": torch.bfloat16, "i64": torch.int64}
BAND = 4.0  # times PyTorch's own error in the case dtype


class Raised(Exception):
    """A node (or the inputs, node -1) raised."""

    def __init__(self, node, message):
        super().__init__(message)
        self.node = node
        self.message = message


def value(v):
    if isinstance(v, str):
        return {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}[v]
    return float(v)


def values_of(tensor_json):
    return [value(v) for v in tensor_json["values"]]


def encode(v, digits=17):
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if v == 0.0:
        return -0.0 if math.copysign(1.0, v) < 0 else 0.0
    return float(f"{v:.{digits}g}")


def weights(shape, dtype):
    n = math.prod(shape)
    return torch.tensor([((7 * i) % 9 - 4) / 4.0 for i in range(n)], dtype=dtype).reshape(shape)


def kiln_dtype(case, answers, ref):
    """The dtype kiln gave a reference ("x3", "n1")."""
    if ref[0] == "x":
        return case["inputs"][int(ref[1:])]["dtype"]
    return answers["nodes"][int(ref[1:])]["dtype"]


def scalar_in(s, dtype):
    """kiln's C++ scalar: float32 for float32 and bf16 tensors, float64 for float64."""
    s = value(s)
    if dtype in ("f32", "bf16") and math.isfinite(s):
        return torch.tensor(s, dtype=torch.float32).item()
    return s


# ---- The ops in PyTorch

ADAPTIVE = ("adaptive_softmax_loss", "adaptive_log_softmax")


def adaptive_parts(node, args):
    """x, head, the (P_i, O_i) pairs and the shortlist size c_0 of an adaptive softmax node,
    checked as kiln checks them (core/ops/adaptive_softmax.cpp)."""
    x, head = args[0], args[1]
    flat = args[2:-1] if node["op"] == "adaptive_softmax_loss" else args[2:]
    if len(flat) % 2:
        raise ValueError("adaptive softmax: a projection without an output")
    pairs = list(zip(flat[0::2], flat[1::2]))
    if x.dim() != 2 or head.dim() != 2 or head.shape[1] != x.shape[1] or \
            head.shape[0] <= len(pairs):
        raise ValueError("adaptive softmax: head must be (shortlist + clusters, d)")
    for p, o in pairs:
        if p.dim() != 2 or o.dim() != 2 or p.shape[1] != x.shape[1] or \
                o.shape[1] != p.shape[0] or p.shape[0] == 0 or o.shape[0] == 0:
            raise ValueError("adaptive softmax: P_i (d_i, d) and O_i (s_i, d_i)")
    return x, head, pairs, head.shape[0] - len(pairs)


def adaptive_softmax(node, args):
    """The adaptive softmax (core/ops/adaptive_softmax.h) composed from its definition: with
    h = log_softmax(x H^T), log p(r) = h_r in the shortlist and h_{c_0+i} +
    log_softmax((x P_i^T) O_i^T)_{r - c_i} in cluster i; the loss is the mean of -log p(target)
    over the rows not ignored, each cluster's log_softmax computed on its own rows only (as
    kiln and nn.AdaptiveLogSoftmaxWithLoss do: a row never reads a cluster its target is not
    in, nor an ignored row anything). The same as nn.AdaptiveLogSoftmaxWithLoss (head_bias
    False; head.weight = H, tail[i] = Linear P_i then O_i): its log_prob and its loss over
    targets (the ignored rows dropped) agree with this to 5e-16 in float64 (checked for
    cutoffs [2, 5], 9 classes, d = 8, div_value 2). Natively, bf16 operands multiply into float32 logits and
    x P_i^T rounds to bf16, as kiln computes them."""
    x, head, pairs, c0 = adaptive_parts(node, args)
    wide = torch.float32 if x.dtype == torch.bfloat16 else x.dtype

    def logits(a, w):
        return a.to(wide) @ w.to(wide).t()

    def cluster(rows, p, o):
        return torch.log_softmax(logits(logits(rows, p).to(x.dtype), o), -1)

    if node["op"] == "adaptive_log_softmax":
        h = torch.log_softmax(logits(x, head), -1)
        parts = [h[:, :c0]]
        for i, (p, o) in enumerate(pairs):
            parts.append(cluster(x, p, o) + h[:, c0 + i:c0 + i + 1])
        return torch.cat(parts, 1)
    t = args[-1]
    if t.dtype != torch.int64 or t.shape != x.shape[:1]:
        raise ValueError("adaptive_softmax_loss: targets must be (N) int64")
    ends = [c0]
    for _, o in pairs:
        ends.append(ends[-1] + o.shape[0])
    kept = t != node["ignore_index"]
    xs, ts = x[kept], t[kept]
    if bool(((ts < 0) | (ts >= ends[-1])).any()):
        raise ValueError("adaptive_softmax_loss: target out of range")
    head_target = ts.clone()
    total = 0.0
    for i, (p, o) in enumerate(pairs):
        rows = (ts >= ends[i]) & (ts < ends[i + 1])
        head_target[rows] = c0 + i
        if bool(rows.any()):
            lp = cluster(xs[rows], p, o)
            total = total - lp.gather(1, (ts[rows] - ends[i])[:, None]).sum()
    h = torch.log_softmax(logits(xs, head), -1)
    total = total - h.gather(1, head_target[:, None]).sum()
    return total / ts.numel()  # NaN for no counted row, as PyTorch's mean of nothing


def slice_view(t, dim, start, end, step):
    dim = dim % t.dim()
    index = [slice(None)] * t.dim()
    index[dim] = slice(start, end, step)
    return t[tuple(index)]


def apply_view(t, v):
    kind = v[0]
    if kind == "transpose":
        return t.transpose(v[1], v[2])
    if kind == "permute":
        return t.permute(tuple(v[1]))
    if kind == "slice":
        if v[4] <= 0:
            raise ValueError("slice step must be positive")
        return slice_view(t, v[1], v[2], v[3], v[4])
    if kind == "narrow":
        return t.narrow(v[1], v[2], v[3])
    if kind == "select":
        return t.select(v[1], v[2])
    if kind == "expand":
        return t.expand(tuple(v[1]))
    if kind == "squeeze":
        return t.squeeze(v[1])
    if kind == "unsqueeze":
        return t.unsqueeze(v[1])
    if kind == "view":
        return t.view(tuple(v[1]))
    if kind == "reshape":
        return t.reshape(tuple(v[1]))
    raise KeyError(kind)


def attention(q, k, v, p, mask, variants=frozenset()):
    """Causal attention of heads: q (B, h, T_q, d), k and v (B, kv, T_k, d) -> (B, T_q, h d)."""
    if q.dim() != 4 or k.dim() != 4 or k.shape != v.shape or q.shape[0] != k.shape[0] \
            or q.shape[3] != k.shape[3] or k.shape[1] == 0 or q.shape[1] % k.shape[1] != 0:
        raise ValueError("attention shapes")
    B, h, tq, d = q.shape
    kv, tk = k.shape[1], k.shape[2]
    if tq > tk:
        raise ValueError("more queries than keys")
    group = h // kv
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    s = q @ k.transpose(-1, -2) * (1.0 / math.sqrt(d))
    visible = torch.arange(tk)[None, :] <= torch.arange(tq)[:, None] + (tk - tq)
    a = torch.softmax(s.masked_fill(~visible, -math.inf), dim=-1)
    if "causal_mask_after_softmax" in variants:
        a = a.masked_fill(~visible, 0.0)
    if p >= 1:
        a = a * 0.0  # what dropout with p = 1 gives
    elif p > 0:
        a = a * mask.to(a.dtype) * (1.0 / (1.0 - p))
    y = a @ v
    return y.transpose(1, 2).reshape(B, tq, h * d)


def run_op(node, args, kdt, variants=frozenset()):
    """node's op in PyTorch on args; kdt(i): kiln's dtype of argument i (for scalars).
    variants: names of DOCUMENTED_VALUES whose kiln semantics to compute instead."""
    op = node["op"]
    if op in ("add", "sub", "mul", "div"):
        return getattr(torch, op)(args[0], args[1])
    if op.endswith("_scalar"):
        s = scalar_in(node["scalar"], kdt(0))
        return {"add": lambda: args[0] + s, "sub": lambda: args[0] - s,
                "mul": lambda: args[0] * s, "div": lambda: args[0] / s}[op[:-7]]()
    if op == "rsub":
        return scalar_in(node["scalar"], kdt(0)) - args[0]
    if op == "rdiv":
        return scalar_in(node["scalar"], kdt(0)) / args[0]
    if op in ("neg", "exp", "log", "sqrt", "tanh", "sigmoid", "relu"):
        return getattr(torch, op)(args[0])
    if op == "pow":
        return torch.pow(args[0], scalar_in(node["exponent"], kdt(0)))
    if op == "gelu":
        return F.gelu(args[0], approximate=node["approximate"])
    if op in ("eq", "ne", "lt", "le", "gt", "ge"):
        out = getattr(torch, op)(args[0], args[1])
        return out.to(torch.promote_types(args[0].dtype, args[1].dtype))
    if op in ("sum", "mean"):
        x = args[0]
        dims = node["dims"] or list(range(x.dim()))
        if len(set(d % max(x.dim(), 1) for d in dims)) != len(dims):
            raise ValueError("repeated dim")
        if not dims:
            return getattr(torch, op)(x)
        return getattr(torch, op)(x, dim=dims, keepdim=node["keepdim"])
    if op == "max":
        return torch.max(args[0], node["dim"], keepdim=node["keepdim"])
    if op == "sum_to":
        x, shape = args[0], node["shape"]
        if x.dim() < len(shape):
            raise ValueError("sum_to")
        lead = x.dim() - len(shape)
        dims = list(range(lead))
        for i, size in enumerate(shape):
            if size == 1 and x.shape[lead + i] != 1:
                dims.append(lead + i)
            elif size != x.shape[lead + i]:
                raise ValueError("sum_to")
        return (x.sum(dim=dims, keepdim=True) if dims else x).reshape(shape)
    if op == "matmul":
        return torch.matmul(args[0], args[1])
    if op == "linear":
        return F.linear(args[0], args[1], args[2] if len(args) == 3 else None)
    if op in ("transpose", "permute", "slice", "narrow", "select", "expand", "squeeze",
              "unsqueeze", "view", "reshape"):
        return apply_view(args[0], node["view"])
    if op == "clone":
        return args[0].clone()
    if op == "softmax":
        return torch.softmax(args[0], node["dim"])
    if op == "log_softmax":
        return torch.log_softmax(args[0], node["dim"])
    if op == "causal_softmax":
        s, offset = args[0], node["offset"]
        if s.dim() < 2 or s.shape[-1] < s.shape[-2] + offset:
            raise ValueError("causal_softmax shapes")
        tq, tk = s.shape[-2], s.shape[-1]
        visible = torch.arange(tk)[None, :] <= torch.arange(tq)[:, None] + offset
        a = torch.softmax(s.masked_fill(~visible, -math.inf), dim=-1)
        if "causal_mask_after_softmax" in variants:
            a = a.masked_fill(~visible, 0.0)  # kiln: masked keys exactly 0, always
        return a
    if op == "layer_norm":
        x, g, b = args
        if g.shape != x.shape[-1:] or b.shape != x.shape[-1:]:
            raise ValueError("layer_norm: gamma and beta must match the last dim")
        if x.dtype == torch.float64:
            # Two passes (mean, then the mean square about it): PyTorch's kernel keeps a
            # rounding residue as the variance of a constant row and overflows on rows of
            # 1e300, where the float64 answer is finite.
            mean = x.mean(-1, keepdim=True)
            centered = x - mean
            var = (centered * centered).mean(-1, keepdim=True)
            return centered / torch.sqrt(var + node["eps"]) * g + b
        return F.layer_norm(x, (x.shape[-1],), g, b, node["eps"])
    if op == "cross_entropy":
        logits, t = args
        if logits.dim() < 1 or t.shape != logits.shape[:-1]:
            raise ValueError("targets shape")
        logits, t = logits.reshape(-1, logits.shape[-1]), t.reshape(-1)
        if "ignored_row_not_finite" in variants:  # kiln: ignored rows are never read
            logits = logits.masked_fill((t == node["ignore_index"])[:, None], 0.0)
        return F.cross_entropy(logits, t, ignore_index=node["ignore_index"])
    if op == "linear_cross_entropy":
        x, w, t = args
        if x.dim() != 2 or w.dim() != 2 or t.shape != x.shape[:1]:
            raise ValueError("linear_cross_entropy shapes")
        if "ignored_row_not_finite" in variants:  # kiln never reads an ignored row
            x = x.masked_fill((t == node["ignore_index"])[:, None], 0.0)
        return F.cross_entropy(x @ w.t(), t, ignore_index=node["ignore_index"])
    if op in ADAPTIVE:
        return adaptive_softmax(node, args)
    if op == "index_select":
        return torch.index_select(args[0], node["dim"], args[1])
    if op == "embedding":
        return F.embedding(args[1], args[0])
    if op == "dropout":
        x, p = args[0], node["p"]
        if p < 0 or p > 1:  # F.dropout's own check
            raise ValueError("dropout probability")
        if p == 0:
            return x
        if p == 1:
            return x * 0  # what PyTorch's dropout gives
        mask = torch.tensor(node["mask"], dtype=x.dtype).reshape(x.shape)
        return x * mask * (1.0 / (1.0 - p))
    if op == "causal_attention":
        x, h, kv, p = args[0], node["heads"], node["kv_heads"], node["p"]
        # The op's definition (core/ops/attention.h): projected (B, T, (h + 2 kv) d).
        if x.dim() != 3 or h % kv != 0 or x.shape[2] % (h + 2 * kv) != 0 or x.shape[2] == 0:
            raise ValueError("causal_attention shapes")
        B, T, W = x.shape
        d = W // (h + 2 * kv)

        def heads(first, count):
            return x[..., first * d:(first + count) * d].reshape(B, T, count, d).transpose(1, 2)

        mask = torch.tensor(node["mask"]).reshape(B, h, T, T) if 0 < p < 1 else None
        return attention(heads(0, h), heads(h, kv), heads(h + kv, kv), p, mask, variants)
    if op == "causal_attention_heads":
        q, k, v = args
        p = node["p"]
        mask = None
        if 0 < p < 1:
            mask = torch.tensor(node["mask"]).reshape(q.shape[0], q.shape[1], q.shape[2],
                                                      k.shape[2])
        return attention(q, k, v, p, mask, variants)
    if op == "where":
        return torch.where(args[0] != 0, args[1], args[2])
    if op == "masked_fill":
        return args[0].masked_fill(args[1] != 0, value(node["value"]))
    if op == "cat":
        return torch.cat(args, node["dim"])
    if op == "split":
        if "sizes" in node:
            pieces = torch.split(args[0], node["sizes"], node["dim"])
        else:
            pieces = torch.split(args[0], node["chunk"], node["dim"])
        return pieces[node["piece"]]
    raise KeyError(op)


# ---- Replays

def make_inputs(case, mode):
    """Leaves (None for int64 or no grad) and the values the nodes read."""
    leaves, values = [], []
    for spec in case["inputs"]:
        dt = spec["dtype"]
        base = spec["base"]
        if dt == "i64":
            t = torch.tensor(spec["values"], dtype=torch.int64).reshape(base)
            leaves.append(None)
        else:
            leaf_dtype = torch.float64 if mode == "f64" else (
                torch.float32 if dt == "bf16" else NATIVE[dt])
            t = torch.tensor([value(v) for v in spec["values"]], dtype=leaf_dtype).reshape(base)
            if spec.get("grad"):
                t.requires_grad_(True)
                leaves.append(t)
            else:
                leaves.append(None)
            if mode == "native" and dt == "bf16":
                t = t.to(torch.bfloat16)
        for v in spec["views"]:
            t = apply_view(t, v)
        values.append(t)
    return leaves, values


def replay(case, answers, mode, variants=frozenset()):
    """End to end in mode "f64" or "native": node values, (values, indices) for max, and the
    gradients (None where kiln has none)."""
    try:
        leaves, named = make_inputs(case, mode)
    except Exception as e:  # noqa: BLE001 (any PyTorch error is a refusal)
        raise Raised(-1, str(e))
    refs = {f"x{i}": t for i, t in enumerate(named)}
    outputs = []
    with torch.enable_grad():
        for i, node in enumerate(case["nodes"]):
            args = [refs[r] for r in node["args"]]
            try:
                out = run_op(node, args, lambda j: kiln_dtype(case, answers, node["args"][j]),
                             variants)
            except Exception as e:  # noqa: BLE001
                raise Raised(i, f"{type(e).__name__}: {e}")
            values, indices = out if node["op"] == "max" else (out, None)
            if mode == "native" and values.is_floating_point() and i < len(answers["nodes"]):
                # Natively, each op runs in the dtype kiln gives it (kiln sums bf16 into
                # float32, PyTorch keeps bf16).
                values = values.to(NATIVE[answers["nodes"][i]["dtype"]])
            refs[f"n{i}"] = values
            outputs.append((values, indices))
        grads = [None] * len(leaves)
        y = outputs[-1][0] if outputs else None
        wanted = [l for l in leaves if l is not None]
        if y is not None and y.requires_grad and wanted:
            w_dtype = torch.float64 if mode == "f64" else (
                torch.float32 if y.dtype == torch.bfloat16 else y.dtype)
            loss = (y * weights(list(y.shape), w_dtype)).sum()
            got = torch.autograd.grad(loss, wanted, allow_unused=True)
            it = iter(got)
            for j, l in enumerate(leaves):
                if l is not None:
                    g = next(it)
                    grads[j] = torch.zeros_like(l) if g is None else g
    return outputs, grads


def node_args(case, answers, i, mode):
    """Node i's arguments: the case's inputs, and kiln's values of earlier nodes."""
    _, inputs = make_inputs(case, mode)
    args = []
    for r in case["nodes"][i]["args"]:
        if r[0] == "x":
            args.append(inputs[int(r[1:])])
            continue
        k = answers["nodes"][int(r[1:])]
        if k["dtype"] == "i64":
            t = torch.tensor(k["values"], dtype=torch.int64)
        else:
            t = torch.tensor(values_of(k), dtype=torch.float64 if mode == "f64"
                             else NATIVE[k["dtype"]])
        args.append(t.reshape(k["shape"]))
    return args


def local_node(case, answers, i, mode, variants=frozenset()):
    """Node i alone on kiln's values of its arguments: (values, indices or None)."""
    node = case["nodes"][i]
    args = node_args(case, answers, i, mode)
    if mode == "native" and node["op"] in ("linear", "layer_norm"):
        # PyTorch wants one dtype; kiln's parameters stay float32 beside bf16 operands.
        args = [args[0]] + [a.to(args[0].dtype) for a in args[1:]]
    with torch.no_grad():
        out = run_op(node, args, lambda j: kiln_dtype(case, answers, node["args"][j]), variants)
    return (out[0], out[1]) if node["op"] == "max" else (out, None)


# ---- Tolerances

def node_tolerance(case, answers, i, node_args64, ref64):
    """(rtol, magnitude tensor) of node i's local comparison: kiln's error may be rtol times
    the magnitude (elementwise) on top of the band."""
    node = case["nodes"][i]
    op = node["op"]
    out_dtype = answers["nodes"][i]["dtype"]
    e = EPS.get(out_dtype, 0.0)
    a = [t.detach().to(torch.float64) if t.is_floating_point() else t for t in node_args64]
    r = ref64.abs()
    exact = {"transpose", "permute", "slice", "narrow", "select", "expand", "squeeze", "unsqueeze",
             "view", "reshape", "clone", "cat", "split", "index_select", "embedding", "where",
             "masked_fill", "neg", "relu", "max", "eq", "ne", "lt", "le", "gt", "ge"}
    if op in exact:
        return 0.0, r
    if op in ("add", "sub", "mul", "div", "add_scalar", "sub_scalar", "mul_scalar", "div_scalar",
              "rsub", "rdiv"):
        return e, r
    if op in ("exp", "log", "sqrt", "tanh", "sigmoid", "dropout"):
        return 4 * e, r
    if op == "gelu":  # x (1 + erf(x / sqrt 2)) / 2 cancels for x < 0: error ~ eps |x|
        return 4 * e, r + a[0].abs()
    if op == "pow":  # x^p: the error of log x times |p|
        return 4 * e, r * (1.0 + abs(value(node["exponent"])))
    if op in ("sum", "mean", "sum_to"):  # the sum of the magnitudes
        mag = run_op(node, [a[0].abs()], lambda j: "f64").abs()
        return 4 * e, mag + r
    if op in ("matmul", "linear"):
        k = a[0].shape[-1] if a[0].dim() else 1
        mag = torch.matmul(a[0].abs(), a[1].abs() if op == "matmul" else a[1].abs().t())
        if op == "linear" and len(a) == 3:
            mag = mag + a[2].abs()
        return 4 * e * (k + 1), mag + r
    if op in ("softmax", "causal_softmax"):
        n = a[0].shape[-1] if a[0].dim() else 1
        return 8 * e * (n + 1), r
    if op == "log_softmax":
        dim = node["dim"]
        n = a[0].shape[dim] if a[0].dim() else 1
        rowmax = a[0].abs().amax(dim=dim, keepdim=True) if a[0].numel() else a[0].abs()
        return 8 * e * (n + 1), a[0].abs() + r + rowmax
    if op == "layer_norm":
        x, g, b = a
        n = x.shape[-1]
        mu = x.mean(-1, keepdim=True)
        rstd = 1.0 / torch.sqrt(((x - mu) ** 2).mean(-1, keepdim=True) + node["eps"])
        mag = g.abs() * (x.abs() + mu.abs()) * rstd + b.abs()
        return 16 * e * (n + 1), mag + r
    if op in ("cross_entropy", "linear_cross_entropy"):
        logits = a[0] if op == "cross_entropy" else a[0].abs() @ a[1].abs().t()
        n = logits.shape[-1] + (a[0].shape[-1] if op == "linear_cross_entropy" else 0)
        scale = logits.abs().max() if logits.numel() else torch.tensor(0.0)
        return 8 * e * (n + 1), r + scale + 1.0
    if op in ADAPTIVE:  # log_softmax of the head's and the clusters' logits, as cross_entropy
        x, head, pairs, _ = adaptive_parts(node, a)
        x = x.abs()
        logits = [x @ head.abs().t()] + [(x @ p.abs().t()) @ o.abs().t() for p, o in pairs]
        n = sum(l.shape[-1] for l in logits) + x.shape[-1] + sum(p.shape[0] for p, _ in pairs)
        scale = max((l.max() for l in logits if l.numel()), default=torch.tensor(0.0))
        return 8 * e * (n + 1), r + scale + 1.0
    if op in ("causal_attention", "causal_attention_heads"):
        # Y = A V with A = softmax(Q K^T / sqrt d): an error d eps |Q| |K| in S moves Y by
        # about that much times |V|.
        finite = [t[torch.isfinite(t)].abs().max().item() for t in a if torch.isfinite(t).any()]
        scale = max(finite, default=0.0)
        n = sum(t.numel() for t in a)
        return 8 * e * (n + 1), r + scale * (1.0 + scale * scale)
    raise KeyError(op)


def largest_value(case):
    """The largest finite magnitude among the inputs and kiln's node values."""
    out = 0.0
    for t in case["inputs"] + case["kiln"]["nodes"]:
        for v in t["values"]:
            v = value(v)
            if math.isfinite(v):
                out = max(out, abs(v))
    return out


def chain_rtol(case):
    return {"f64": 1e-10, "f32": 1e-5, "bf16": 2.0 ** -6}[case["dtype"]] * (1 + len(case["nodes"]))


def element_ok(k, r, n, tol, rounded=None):
    """kiln's k against the float64 reference r (tolerance tol), PyTorch's native n and r
    rounded to kiln's dtype (where r overflows it)."""
    def same(x, y):
        return (math.isnan(x) and math.isnan(y)) or (math.isinf(y) and x == y)

    if same(k, r) or (n is not None and same(k, n)) or (rounded is not None and same(k, rounded)):
        return True
    if not (math.isfinite(k) and math.isfinite(r)):
        return False
    band = BAND * abs(n - r) if n is not None and math.isfinite(n) else 0.0
    return abs(k - r) <= tol + band


def compare(kiln_values, ref, native, rtol, mag, scale_tol=0.0, scale=None, floor=0.0,
            dtype=None, every=False):
    """The first element where kiln's values miss, or None (every: the list of all misses as
    (index, kiln, reference, description)). Element i may differ from the float64 reference
    by floor + rtol mag_i + scale_tol (|ref_i| + scale) (scale: max |ref| over the tensor unless
    given) plus the band; mag defaults to |ref|."""
    r = ref.detach().to(torch.float64).reshape(-1).tolist()
    m = mag.detach().to(torch.float64).expand_as(ref.detach()).reshape(-1).tolist() \
        if mag is not None else [abs(x) for x in r]
    nat = native.detach().to(torch.float64).reshape(-1).tolist() if native is not None else None
    rounded = ref.detach().to(NATIVE[dtype]).to(torch.float64).reshape(-1).tolist() \
        if dtype in ("f32", "bf16") else None
    if scale is None:
        finite = [abs(x) for x in r if math.isfinite(x)]
        scale = max(finite) if finite else 0.0
    if len(kiln_values) != len(r):
        what = f"{len(kiln_values)} values where PyTorch has {len(r)}"
        return [(0, math.nan, math.nan, what)] if every else what
    misses = []
    floor = floor + TINY.get(dtype, 0.0)
    for i, (k, x) in enumerate(zip(kiln_values, r)):
        mi = m[i] if math.isfinite(m[i]) else abs(x)
        tol = floor + rtol * mi + (scale_tol * (abs(x) + scale) if math.isfinite(x) else 0.0)
        if not element_ok(k, x, nat[i] if nat else None, tol, rounded[i] if rounded else None):
            what = (f"element {i}: kiln {k!r}, PyTorch {x!r}" +
                    (f" (PyTorch in the case dtype {nat[i]!r})" if nat else "") +
                    f", tolerance {tol:.3g}")
            if not every:
                return what
            misses.append((i, k, x, what))
    return misses if every else None


# ---- One case

def check(case):
    """None when kiln agrees with PyTorch, else (what, detail, documented key or None): an
    error disagreement is documented when the case's "why" is in DOCUMENTED, a value one when
    PyTorch computing kiln's documented semantics (a DOCUMENTED_VALUES variant) agrees."""
    failure = check_with(case, frozenset())
    if failure is None or failure[0] == "error":
        return failure
    ops = {n["op"] for n in case["nodes"]}
    for key, uses in (("ignored_row_not_finite", {"cross_entropy", "linear_cross_entropy"}),
                      ("causal_mask_after_softmax",
                       {"causal_softmax", "causal_attention", "causal_attention_heads"})):
        if ops & uses and check_with(case, frozenset([key])) is None:
            return failure[0], failure[1], key
    return failure


def check_errors(case, answers, torch_error):
    kiln_error = answers.get("error_node")
    if kiln_error is not None and torch_error is not None:
        if kiln_error == torch_error.node:
            return None
        return ("error", f"kiln raises at node {kiln_error} ({answers['error']}), PyTorch at "
                         f"node {torch_error.node} ({torch_error.message})", None)
    if kiln_error is None:
        return ("error", f"PyTorch raises at node {torch_error.node} ({torch_error.message}); "
                         f"kiln does not", None)
    # PyTorch in float64 accepts it; in the case's own dtypes it may refuse a dtype mixture.
    try:
        replay(case, answers, "native")
    except Raised as e:
        if e.node == kiln_error:
            return None
    why = case.get("why")
    return ("error", f"kiln raises at node {kiln_error}: {answers['error']}; PyTorch does not",
            why if why in DOCUMENTED else None)


def check_with(case, variants):
    answers = case["kiln"]
    try:
        ref_out, ref_grads = replay(case, answers, "f64", variants)
        torch_error = None
    except Raised as e:
        torch_error = e
    if answers.get("error_node") is not None or torch_error is not None:
        return check_errors(case, answers, torch_error)
    if answers.get("backward_error"):
        return ("backward", "kiln's backward raised: " + answers["backward_error"], None)
    try:
        nat_grads = replay(case, answers, "native", variants)[1]
    except Raised:
        nat_grads = None
    # Each node on kiln's values of its arguments (a chain's error growth is PyTorch's too: its
    # nodes are compared locally, its gradients end to end).
    for i, node in enumerate(case["nodes"]):
        k = answers["nodes"][i]
        if k["shape"] != list(ref_out[i][0].shape):
            return ("forward", f"node {i} ({node['op']}): shape {k['shape']}, PyTorch "
                               f"{list(ref_out[i][0].shape)}", None)
        local, indices = local_node(case, answers, i, "f64", variants)
        try:
            local_native = local_node(case, answers, i, "native", variants)[0]
        except Exception:  # noqa: BLE001 (no band where PyTorch cannot run the dtype)
            local_native = None
        rtol, mag = node_tolerance(case, answers, i, node_args(case, answers, i, "f64"),
                                   local.to(torch.float64))
        misses = compare(values_of(k), local, local_native, rtol, mag, dtype=k["dtype"],
                         every=True)
        if misses:
            return ("forward", f"node {i} ({node['op']}): {misses[0][3]}" +
                    (f" (and {len(misses) - 1} more)" if len(misses) > 1 else ""),
                    documented_forward(case, answers, i, misses, local_native))
        if indices is not None and k["indices"] != indices.reshape(-1).tolist():
            return ("forward", f"node {i} (max): indices {k['indices']}, PyTorch "
                               f"{indices.reshape(-1).tolist()}", None)
    # Every gradient, end to end: first against |reference| and the band; where that misses,
    # against the size of the terms the chain rule sums for each element (term_magnitudes).
    floor = 1e-12 * max(1.0, largest_value(case))  # float64's own noise, where all else is 0
    rtol = chain_rtol(case)
    magnitudes = None
    for j, g in enumerate(answers["grads"]):
        r = ref_grads[j] if j < len(ref_grads) else None
        if (g is None) != (r is None):
            return ("gradient", f"x{j}: kiln {'has no' if g is None else 'has a'} gradient, "
                                f"PyTorch {'has none' if r is None else 'has one'}", None)
        if g is None:
            continue
        if g["shape"] != list(r.shape):
            return ("gradient", f"x{j}: shape {g['shape']}, PyTorch {list(r.shape)}", None)
        n = nat_grads[j] if nat_grads is not None else None
        misses = compare(values_of(g), r, n, rtol, None, floor=floor, dtype=g["dtype"], every=True)
        if misses and magnitudes is None:
            magnitudes = term_magnitudes(case, answers, variants)
        if misses and magnitudes[0][j] is not None:
            terms, largest = magnitudes[0][j], magnitudes[1]
            misses = compare(values_of(g), r, n, rtol, r.abs() + terms + largest, floor=floor,
                             dtype=g["dtype"], every=True)
        if misses:
            key = documented_gradient(case, answers, misses, ref_out,
                                      magnitudes[1] if magnitudes else 0.0)
            return ("gradient", f"x{j}: {misses[0][3]}" +
                    (f" (and {len(misses) - 1} more)" if len(misses) > 1 else ""), key)
    return None


def term_magnitudes(case, answers, variants):
    """The size of the terms each input's gradient sums, and the largest such size anywhere in
    the backward pass: |w| pushed back through every node with the absolute values of the
    node's Jacobian (float64, on the nodes' own arguments), so that M = the sum over paths of
    |products|; and max M over every node's output and input. A fused backward cancels terms of
    that largest size even where the exact Jacobian is small (layer_norm of two elements), so
    rounding moves a gradient by about eps (M + largest). A view's Jacobian is 0/1: its backward
    carries M as it is. NaN entries count as 0."""
    leaves, named = make_inputs(case, "f64")
    refs = {f"x{i}": t for i, t in enumerate(named)}
    kdt = {}
    outs = []
    with torch.enable_grad():
        for i, node in enumerate(case["nodes"]):
            args = [refs[r] for r in node["args"]]
            f = lambda j, node=node: kiln_dtype(case, answers, node["args"][j])  # noqa: E731
            out = run_op(node, args, f, variants)
            out = out[0] if node["op"] == "max" else out
            refs[f"n{i}"] = out
            outs.append(out)
            kdt[i] = f
    m = {f"n{len(outs) - 1}": weights(list(outs[-1].shape), torch.float64).abs()}
    internal = 0.0  # the largest term a fused backward forms inside (fused_terms)
    for i in range(len(outs) - 1, -1, -1):
        node, key = case["nodes"][i], f"n{i}"
        if key not in m or not outs[i].is_floating_point():
            continue
        args = [refs[r] for r in node["args"]]
        internal = max(internal, fused_terms(node, [a.detach() for a in args], m[key]))
        for a, ref in enumerate(node["args"]):
            arg = args[a]
            if not arg.is_floating_point() or not arg.requires_grad:
                continue

            def f(t, a=a, node=node, args=args, i=i):
                new = list(args)
                new[a] = t
                out = run_op(node, new, kdt[i], variants)
                return out[0] if node["op"] == "max" else out

            jac = torch.autograd.functional.jacobian(f, arg.detach())
            jac = jac.reshape(outs[i].numel(), arg.numel()).abs().nan_to_num(nan=0.0)
            term = (m[key].reshape(1, -1) @ jac).reshape(arg.shape)
            m[ref] = m[ref] + term if ref in m else term
    largest = internal if math.isfinite(internal) else 0.0
    for t in m.values():
        finite = t[torch.isfinite(t)]
        if finite.numel():
            largest = max(largest, finite.max().item())
    result = []
    for j, leaf in enumerate(leaves):
        ref = f"x{j}"
        if leaf is None or ref not in m:
            result.append(None if leaf is None else torch.zeros_like(leaf))
            continue
        (g,) = torch.autograd.grad(named[j], leaf, grad_outputs=m[ref], allow_unused=True)
        result.append(torch.zeros_like(leaf) if g is None else g.detach().abs())
    return result, largest


def fused_terms(node, args, upstream):
    """The largest term a fused op's backward forms from the upstream gradient before its
    terms cancel: layer_norm's dy gamma rstd, attention's (dY . V) |K| / sqrt(d) (summed over
    the keys). The exact Jacobian hides them (a layer_norm of two elements has none)."""
    def biggest(t):
        t = t[torch.isfinite(t)]
        return t.abs().max().item() if t.numel() else 0.0

    up = biggest(upstream)
    if node["op"] == "layer_norm":
        x, g = args[0], args[1]
        if x.numel() == 0:
            return 0.0
        centered = x - x.mean(-1, keepdim=True)
        rstd = 1.0 / torch.sqrt((centered * centered).mean(-1) + node["eps"])
        return up * biggest(g) * biggest(rstd)
    if node["op"] in ("causal_attention", "causal_attention_heads"):
        size = biggest(torch.cat([a.reshape(-1) for a in args]))
        d = args[0].shape[-1] if node["op"] == "causal_attention_heads" else \
            args[0].shape[-1] // (node["heads"] + 2 * node["kv_heads"])
        keys = args[1].shape[2] if node["op"] == "causal_attention_heads" else args[0].shape[1]
        try:
            return up * size ** 3 * keys / math.sqrt(max(d, 1)) * 4.0  # 4: dropout's 1/(1 - p)
        except OverflowError:
            return math.inf
    return 0.0


def non_finite_order(misses, native):
    """Every miss non-finite in kiln and in PyTorch (float64, or in the case dtype)."""
    n = native.detach().to(torch.float64).reshape(-1).tolist() if native is not None else None
    return all(not math.isfinite(k) and (not math.isfinite(r) or (n and not math.isfinite(n[i])))
               for i, k, r, _ in misses)


def documented_forward(case, answers, i, misses, native):
    """The DOCUMENTED_VALUES key that explains every miss of node i's value, or None."""
    if near_range(case, answers, i) and \
            all(not math.isfinite(k) or not math.isfinite(r) for _, k, r, _ in misses):
        return "fused_range"
    if non_finite_order(misses, native):
        return "non_finite_order"
    return None


def near_range(case, answers, i):
    """Whether node i is a fused op whose unnormalised intermediates can leave the dtype's range
    on these operands (or whose operands are not finite): attention (scores Q K^T, the sum of
    exp(S - m) Z V up to T_k / (1 - p) max |V|) or linear_cross_entropy (P'' = exp(logits - m)
    less 1 / s at the target, up to V, times W or X), and the adaptive softmax loss, which is
    linear_cross_entropy on x H^T's operands and on x P_i^T and O_i."""
    node = case["nodes"][i]
    if node["op"] not in ("causal_attention", "causal_attention_heads", "linear_cross_entropy",
                          "adaptive_softmax_loss"):
        return False
    args = [a for a in node_args(case, answers, i, "f64") if a.is_floating_point()]
    if any(not bool(torch.isfinite(a).all()) for a in args):
        return True
    largest = max((a.abs().max().item() for a in args if a.numel()), default=0.0)
    limit = 3.4028234663852886e38  # float32's; float64 cases hold no values near theirs
    if node["op"] == "linear_cross_entropy":
        return largest * (args[1].shape[0] + 1) * max(largest, 1.0) >= limit
    if node["op"] == "adaptive_softmax_loss":  # linear_cross_entropy on x P_i^T and O_i
        classes, big = max(a.shape[0] for a in args[1:]), max(largest, 1.0)
        return largest * (classes + 1) * big * big * big >= limit
    keys = args[1].shape[2] if node["op"] == "causal_attention_heads" else args[0].shape[1]
    return largest * max(largest * args[0].shape[-1], keys / (1.0 - node["p"])) >= limit


def documented_gradient(case, answers, misses, ref_out, largest_term):
    """The DOCUMENTED_VALUES key that explains every gradient element kiln misses, or None
    (largest_term: the largest chain-rule term anywhere in the backward pass, term_magnitudes)."""
    if any(near_range(case, answers, i) for i in range(len(case["nodes"]))) and \
            all(not math.isfinite(k) or not math.isfinite(r) for _, k, r, _ in misses):
        return "fused_range"
    if non_finite_order(misses, None) or all(not math.isfinite(k) for _, k, _, _ in misses) and \
            any(math.isinf(v) for t in case["kiln"]["nodes"] for v in values_of(t)
                if t["dtype"] != "i64"):
        return "non_finite_order"
    if case["dtype"] in ("f32", "bf16") and largest_term >= 3.4028234663852886e38 and \
            all(math.isinf(k) and math.isfinite(r) for _, k, r, _ in misses):
        return "gradient_range"
    return None


# ---- kiln

def kiln_run(kiln, cases):
    """kiln's answers for `cases` (kiln_differential run)."""
    with tempfile.TemporaryDirectory() as d:
        src, dst = os.path.join(d, "in.jsonl"), os.path.join(d, "out.jsonl")
        with open(src, "w") as f:
            for c in cases:
                f.write(json.dumps({k: v for k, v in c.items() if k != "kiln"}) + "\n")
        subprocess.run([kiln, "run", "--in", src, "--out", dst], check=True)
        with open(dst) as f:
            return [json.loads(line) for line in f]


def kiln_generate(kiln, seed, start, count, families):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "cases.jsonl")
        cmd = [kiln, "generate", "--seed", str(seed), "--start", str(start), "--count", str(count),
               "--out", out]
        if families:
            cmd += ["--families", families]
        subprocess.run(cmd, check=True)
        with open(out) as f:
            return [json.loads(line) for line in f]


# ---- Reduction to a minimal case

def isolate(case, i):
    """Node i alone, its node arguments replaced by kiln's values of them as plain inputs."""
    answers = case["kiln"]
    node = dict(case["nodes"][i])
    inputs, args, remap = [], [], {}
    for r in node["args"]:
        if r in remap:
            args.append(remap[r])
            continue
        if r[0] == "x":
            spec = dict(case["inputs"][int(r[1:])])
        else:
            k = answers["nodes"][int(r[1:])]
            spec = {"dtype": k["dtype"], "base": k["shape"], "values": k["values"], "views": [],
                    "grad": k["dtype"] != "i64"}
        remap[r] = f"x{len(inputs)}"
        inputs.append(spec)
        args.append(remap[r])
    node["args"] = args
    out = {k: v for k, v in case.items() if k not in ("inputs", "nodes", "kiln")}
    out.update(inputs=inputs, nodes=[node], ops=[node["op"]])
    return out


def prefix(case, j):
    out = {k: v for k, v in case.items() if k != "kiln"}
    out["nodes"] = case["nodes"][:j]
    out["ops"] = [n["op"] for n in out["nodes"]]
    return out


def simpler_values(case):
    """Candidates with one input element made simpler (0 or 1), one per element."""
    out = []
    for i, spec in enumerate(case["inputs"]):
        if spec["dtype"] == "i64":
            continue
        for e, v in enumerate(spec["values"]):
            for simple in (0.0, 1.0):
                if v == simple:
                    continue
                c = json.loads(json.dumps({k: v2 for k, v2 in case.items() if k != "kiln"}))
                c["inputs"][i]["values"][e] = simple
                out.append(c)
    return out


def still_fails(case, failure):
    try:
        got = check(case)
    except Exception:  # noqa: BLE001 (a candidate the replay cannot run is no smaller case)
        return False
    return got is not None and got[0] == failure[0] and got[2] is None


def reduce_case(kiln, case, failure):
    """A smaller case with the same kind of disagreement."""
    best = case
    candidates = []
    if len(case["nodes"]) > 1:
        candidates += [prefix(case, j) for j in range(1, len(case["nodes"]))]
        candidates += [isolate(case, i) for i in range(len(case["nodes"]))]
    if candidates:
        for c in kiln_run(kiln, candidates):
            if still_fails(c, failure) and len(c["nodes"]) < len(best["nodes"]):
                best = c
                if len(best["nodes"]) == 1:
                    break
    for _ in range(12):
        cands = simpler_values(best)
        if not cands:
            break
        improved = False
        for c in kiln_run(kiln, cands[:400]):
            if still_fails(c, failure):
                best = c
                improved = True
                break
        if not improved:
            break
    return best


# ---- Commands

def family_of(case):
    return case["family"]


def run(args):
    per_family = collections.defaultdict(collections.Counter)
    per_op = collections.Counter()
    disagreements, documented = [], collections.Counter()
    done = 0
    for start in range(0, args.count, args.batch):
        n = min(args.batch, args.count - start)
        for case in kiln_generate(args.kiln, args.seed, start, n, args.families):
            done += 1
            fam = family_of(case)
            for op in case.get("ops", []):
                per_op[op] += 1
            try:
                failure = check(case)
            except Exception as e:  # noqa: BLE001 (a replay bug is reported, not hidden)
                failure = ("replay", f"{type(e).__name__}: {e}", None)
            kind = case["kind"]
            if failure is None:
                per_family[fam][kind + " agree"] += 1
            elif failure[2] is not None:
                per_family[fam][kind + " documented"] += 1
                documented[failure[2]] += 1
            else:
                per_family[fam][kind + " DISAGREE"] += 1
                disagreements.append((case, failure))
        print(f"{done} cases, {len(disagreements)} disagreements", file=sys.stderr)
    print(f"\n{done} cases (seed {args.seed}) against PyTorch {torch.__version__}")
    print(f"{'family':<24} {'cases':>6}  outcome")
    for fam in sorted(per_family):
        c = per_family[fam]
        print(f"{fam:<24} {sum(c.values()):>6}  " +
              ", ".join(f"{k} {v}" for k, v in sorted(c.items())))
    print("\nops in chains and cases: " + ", ".join(f"{k} {v}" for k, v in sorted(per_op.items())))
    if documented:
        print("\ndocumented semantic differences met:")
        for key, n in sorted(documented.items()):
            print(f"  {key} ({n}): {DOCUMENTED.get(key) or DOCUMENTED_VALUES.get(key)}")
    print(f"\n{len(disagreements)} disagreements")
    seen = set()
    for case, failure in disagreements[:args.max_reduce]:
        small = reduce_case(args.kiln, case, failure) if args.max_reduce else case
        key = (failure[0], tuple(small.get("ops", [])), small["dtype"])
        if key in seen:
            continue
        seen.add(key)
        final = check(small) or failure
        print(f"\n{case['id']} {case['family']} {case['dtype']}: {failure[0]}: {failure[1]}")
        print(f"  minimal case: {final[1]}")
        print("  " + json.dumps({k: v for k, v in small.items() if k != "kiln"}))
    return 1 if disagreements else 0


def expectation(case):
    """The golden "expect" of a case kiln and PyTorch agree on, or None when it does not go in
    the corpus (PyTorch's own answer in the case dtype misses the stated tolerance, or a value
    depends on the dtype's range)."""
    answers = case["kiln"]
    if answers.get("error_node") is not None:
        try:
            replay(case, answers, "f64")
            torch_raises = False
        except Raised:
            torch_raises = True
        if not torch_raises and case.get("why") not in DOCUMENTED:
            return None
        return {"raises": True, "error_node": answers["error_node"], "torch_raises": torch_raises}
    ref_out, ref_grads = replay(case, answers, "f64")
    nat_out, nat_grads = replay(case, answers, "native")
    tol = {"f64": 1e-9, "f32": 1e-5, "bf16": 1.0 / 64}[case["dtype"]]
    digits = 17 if case["dtype"] == "f64" else 10

    def golden(ref, nat, kiln_json):
        r = ref.detach().to(torch.float64).reshape(-1).tolist()
        n = nat.detach().to(torch.float64).reshape(-1).tolist()
        k = values_of(kiln_json)
        finite = [abs(x) for x in r if math.isfinite(x)]
        scale = max(finite) if finite else 0.0
        for x, y, z in zip(r, n, k):
            for other in (y, z):
                if math.isfinite(x) != math.isfinite(other) or \
                        (math.isnan(x) != math.isnan(other)) or \
                        (math.isinf(x) and x != other):
                    return None
                if math.isfinite(x) and abs(other - x) > tol * (abs(x) + scale) / 2:
                    return None
        return {"shape": list(ref.shape), "values": [encode(x, digits) for x in r]}

    last = len(case["nodes"]) - 1
    nodes = {}
    for i in ([last] if last > 0 else [0]):
        g = golden(ref_out[i][0], nat_out[i][0], answers["nodes"][i])
        if g is None:
            return None
        if ref_out[i][1] is not None:
            if ref_out[i][1].reshape(-1).tolist() != answers["nodes"][i]["indices"]:
                return None
            g["indices"] = ref_out[i][1].reshape(-1).tolist()
        nodes[str(i)] = g
    grads = []
    for j, g in enumerate(answers["grads"]):
        if g is None or ref_grads[j] is None:
            grads.append(None)
            continue
        e = golden(ref_grads[j], nat_grads[j], g)
        if e is None:
            return None
        grads.append(e)
    return {"nodes": nodes, "grads": grads}


def make_golden(args):
    taken = collections.Counter()
    lines = []
    size = 0
    for start in range(0, args.count, args.batch):
        n = min(args.batch, args.count - start)
        for case in kiln_generate(args.kiln, args.seed, start, n, args.families):
            key = (case["family"], case["kind"], case["dtype"])
            cap = {"single": 2 * args.per_kind, "chain": 10 * args.per_kind, "error": 2}
            if taken[key] >= cap[case["kind"]]:
                continue
            failure = check(case)
            if failure is not None and not (failure[0] == "error" and failure[2] is not None):
                continue  # a documented refusal goes in (kiln must keep raising); nothing else
            try:
                expect = expectation(case)
            except Raised:
                continue
            if expect is None:
                continue
            spec = {k: v for k, v in case.items() if k != "kiln"}
            line = json.dumps({"case": spec, "expect": expect}, separators=(",", ":"))
            if len(line) > args.max_line or size + len(line) > args.max_bytes:
                continue
            taken[key] += 1
            size += len(line) + 1
            lines.append(line)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        for line in lines:
            f.write(line + "\n")
    fams = collections.Counter(k[0] for k in taken.elements())
    print(f"{len(lines)} cases, {size} bytes in {args.out}")
    print(", ".join(f"{k} {v}" for k, v in sorted(fams.items())))
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("command", choices=["run", "golden"])
    p.add_argument("--kiln", default=DEFAULT_KILN)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--count", type=int, default=5000)
    p.add_argument("--families", default="")
    p.add_argument("--batch", type=int, default=500)
    p.add_argument("--max-reduce", type=int, default=30, help="disagreements to reduce")
    p.add_argument("--out", default=GOLDEN)
    p.add_argument("--per-kind", type=int, default=5,
                   help="golden cases per family and dtype: twice this of single ops, ten times "
                        "this of chains, 2 bad calls")
    p.add_argument("--max-line", type=int, default=4000)
    p.add_argument("--max-bytes", type=int, default=1_500_000)
    args = p.parse_args()
    sys.exit(run(args) if args.command == "run" else make_golden(args))


if __name__ == "__main__":
    main()
