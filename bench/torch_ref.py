#!/usr/bin/python3
"""torch_ref.py: kiln's reference model and recipe, in PyTorch, on WikiText-2.

kiln's TransformerLM with its default configuration, and train_lm with this file's recipe
spelled out (its own defaults are the 15-minute recipe: bench/compare_torch.sh names the flags),
compute exactly what this file computes; bench/compare_torch.sh runs the two side by side,
tools/make_golden.py builds the golden test values from this model and tools/kiln_to_torch.py
evaluates a kiln checkpoint with it. The recipe:

  data     vocabulary over train.txt, valid.txt, test.txt in that order, each line's words
           (str.split) followed by <eos>, ids in order of first appearance (33,278 words for
           WikiText-2); a split's token stream is cut into B columns (batchify) and read in
           windows of T rows, the targets being the next tokens; no state between windows
  model    X = Emb[ids] * sqrt(d) + PE, PE sinusoidal and interleaved (even dims sin, odd cos),
           then dropout; N blocks, post-LN by default:
               X = LN(X + Dropout(W_O Attn(X)))        (pre-LN: X + Dropout(W_O Attn(LN X)))
               X = LN(X + Dropout(FFN(X)))             (pre-LN: X + Dropout(FFN(LN X)))
           (pre-LN adds a final LayerNorm); Attn: one fused QKV Linear(d, 3d) with bias, rows
           ordered Q heads, K heads, V heads, causal softmax(Q K^T / sqrt(d/h)) V, no dropout on
           the attention probabilities; W_O a Linear(d, d) with bias; FFN Linear(d, ff), ReLU
           (or GELU, erf form), Linear(ff, d); logits = X E^T with E the embedding (tied, no
           bias); loss the mean cross-entropy over every target
  init     embedding U(-0.1, 0.1); Linear as PyTorch's default (weights kaiming_uniform(a=sqrt(5)),
           biases U(-1/sqrt(fan_in), 1/sqrt(fan_in))); LayerNorm weight 1, bias 0, eps 1e-5
  training Adam(lr, betas, eps), no weight decay, constant learning rate, the global gradient
           norm clipped to --clip; defaults d 256, 4 heads, 2 layers, ff 1024, T 64, B 32,
           dropout 0.1, lr 1e-3, clip 1.0
  eval     (--eval) valid and test: batch 10, non-overlapping windows of T, every target counted
           (the last window may be shorter), perplexity = exp(summed loss / targets)

The adaptive softmax (Grave et al. 2017), train_lm's flags of the same names:
  --adaptive-softmax c_0,...,c_{n-1}   (e.g. 2000,10000: increasing, above 0, below the vocabulary)
           replaces the full softmax by nn.AdaptiveLogSoftmaxWithLoss(d, vocab, cutoffs,
           div_value=--adaptive-div (4), head_bias=False) over frequency ranks: order[r] is the id
           of rank r, the ids sorted by their count in train's token stream (the whole split, as
           read) descending, ties by ascending id; the vocabulary and the ids keep their order, the
           output maps targets to ranks. Head logits X H^T, H = [E[order[:c_0]]; C]: the shortlist
           rows ARE the embedding's rows of the c_0 most frequent words (tied), C (n, d) one row per
           cluster; cluster i (ranks [c_i, c_{i+1}), c_n = vocab) has logits (X P_i^T) W_i^T, P_i
           (d_i, d), W_i (s_i, d_i), d_i = int(d // div^(i+1)), no biases; log p(r) =
           log_softmax(head)_r for r < c_0, else log_softmax(head)_{c_0+i} +
           log_softmax(cluster i)_{r-c_i}, the log-softmaxes in float32 (bf16 logits too). The
           loss is the module's: the mean over every target of -log p, each cluster computed only
           for the rows whose target is in it; evaluation the same, an exact normalized
           distribution. The tail words' input rows of E stay E's, untied from W_i. Init: C, P_i,
           W_i as nn.Linear(d, n), nn.Linear(d, d_i), nn.Linear(d_i, s_i) (no bias), made after
           the blocks in that order (C, P_0, W_0, P_1, ...).
  --input adaptive (adaptive input, Baevski & Auli 2019, tied; needs --adaptive-softmax): no
           (vocab, d) embedding; the input vector of a word of rank r is S[r] for r < c_0, S (c_0, d)
           a parameter U(-0.1, 0.1) that is also the head's shortlist rows, and W_i[r - c_i] P_i in
           cluster i, the output cluster's very tensors; then * sqrt(d) + PE as above.
  The model line then reads "adaptive=2000,10000 div=4.0 input=embedding|adaptive" and splits
  the parameters into the embedding (E, or S and every P_i, W_i with adaptive input: the input's
  tensors, shared with the output where tied), the adaptive softmax beyond it (C, and the P_i,
  W_i without adaptive input) and non-embedding (the rest).

Options beyond the recipe: --precision bf16 runs the forward and the loss under
torch.autocast(dtype=torch.bfloat16), as PyTorch users train in bf16; --sdpa computes attention
with F.scaled_dot_product_attention(is_causal=True) instead of materialising the (T, T) scores
(PyTorch 2); --fused-adam asks for torch.optim.Adam(fused=True) and says when the installed
PyTorch cannot; --norm pre and --activation gelu follow train_lm's flags of the same names.

train_lm's quality recipe (its defaults since the 15-minute search, docs/recipes.md), so that the
two programs train the same recipe for the same time (bench/compare_recipe.sh):
  --schedule cosine|wsd, --lr-warmup W, --min-lr, --decay-fraction F, --decay-steps D: the
           learning rate of step s (0-based) is lr (s+1)/W during the warm-up (s < W); cosine then
           min + (lr - min)(1 + cos(pi (s-W)/(D-W)))/2; wsd stays at lr until D - round(F D) (at
           least W) and then falls linearly to min at D. Bounded by --time-budget alone, D is
           fitted to the budget as train_lm fits it, right before the first step whose lr
           depends on it (wsd: by the rate so far, after at least 10 timed steps, the first left
           out): D = s + 1 + floor(time left / seconds per step).
  --shuffle: each epoch visits the windows (the batchified rows) in a new random order.
  --word-dropout p: each training step zeroes the embedding of a fraction p of the word types
           at every occurrence and scales the rest by 1/(1-p) (AWD-LSTM's), before * sqrt(d).

What it prints (bench/compare_torch.sh and scripts/gpu_check.sh read these lines):
  torch <version> | python <version> | threads N | device D | blas ... | precision ... | ...
  model: d=256 h=4 L=2 ff=1024 T=64 B=32 dropout=0.1 ... | parameters 10,098,688 (...)
         (--adaptive-softmax 2000,10000: ... | parameters 11,004,128 (embedding 8,519,168, adaptive
         softmax beyond it 905,440, non-embedding 1,579,520))
  step     50 | epoch 1 |   12.3s | loss 7.1234 | ppl 1240.10 | last 7.0021 |   3012.4 tok/s
  RESULT train_tokens_per_sec 3012.4 | measured steps 95 (...) | excluded warm-up steps 5
  RESULT steps 100 | epochs 1 (last partial) | train tokens 204800 | train wall 70.1s | final loss ...
  RESULT machine: other processes used ... cpu-s during ...
  RESULT valid loss 5.3000 ppl 200.34 (28.4s) | test loss 5.2200 ppl 184.93 (31.9s)   (--eval)
A "step" line's loss is the mean over the steps since the previous line; tokens/s leaves out the
first --warmup steps (start-up, first touch of memory), as kiln's figures do.

Run it through bench/run_torch_ref.sh (Debian's python3-torch with OpenBLAS and tcmalloc) or
bench/run_torch_pypi.sh (the PyPI wheel); `python3 bench/torch_ref.py --help` lists the flags.
"""
import argparse
import contextlib
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_DATA = os.environ.get("KILN_DATA") or os.path.join(HERE, "..", "datasets", "wikitext-2")


# ---------------------------------------------------------------------------------------- data
class Dictionary:
    """Word <-> id, ids in order of first appearance."""

    def __init__(self):
        self.word2idx = {}
        self.idx2word = []

    def add_word(self, word):
        index = self.word2idx.get(word)
        if index is None:
            index = len(self.idx2word)
            self.word2idx[word] = index
            self.idx2word.append(word)
        return index

    def __len__(self):
        return len(self.idx2word)


class Corpus:
    """train, valid and test as int64 token streams; the vocabulary grows over the three in that
    order, each file read to its end before the next."""

    def __init__(self, folder):
        self.dictionary = Dictionary()
        self.train, self.valid, self.test = (
            self._read(os.path.join(folder, f"{split}.txt")) for split in ("train", "valid", "test"))

    def _read(self, path):
        if not os.path.isfile(path):
            sys.exit(f"torch_ref: {path} not found (get the data with scripts/get_wikitext2.sh, "
                     "or pass --data DIR / set KILN_DATA)")
        ids = []
        with open(path, encoding="utf8") as f:
            for line in f:
                ids.extend(self.dictionary.add_word(w) for w in line.split() + ["<eos>"])
        return torch.tensor(ids, dtype=torch.int64)


def batchify(stream, columns):
    """(N,) -> (N // columns, columns): column c holds the c-th contiguous piece of the stream."""
    rows = stream.numel() // columns
    return stream[: rows * columns].view(columns, rows).t().contiguous()


def get_batch(source, row, seq_len):
    """Window starting at `row` of a batchified source: inputs and next-token targets, (B, T)."""
    T = min(seq_len, source.size(0) - 1 - row)
    inputs = source[row:row + T]
    targets = source[row + 1:row + 1 + T]
    return inputs.t().contiguous(), targets.t().contiguous()


# --------------------------------------------------------------------------------------- model
class PositionalEncoding(nn.Module):
    """PE[t, 2i] = sin(t / 10000^(2i/d)), PE[t, 2i+1] = cos(t / 10000^(2i/d))."""

    def __init__(self, d_model, max_len=5000):
        super().__init__()
        t = torch.arange(max_len, dtype=torch.float).unsqueeze(1)
        inv_freq = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, d_model)
        pe[:, 0::2] = torch.sin(t * inv_freq)
        pe[:, 1::2] = torch.cos(t * inv_freq)
        self.register_buffer("pe", pe)  # (max_len, d)

    def forward(self, x):  # (B, T, d)
        return x + self.pe[: x.size(1)]


def dropout_or_identity(p):
    return nn.Dropout(p) if p > 0 else nn.Identity()


class Block(nn.Module):
    """One transformer block; parameter names are those tools/kiln_names.py maps to kiln's."""

    def __init__(self, d, heads, ff, p, norm="post", activation="relu", sdpa=False):
        super().__init__()
        if d % heads:
            sys.exit(f"torch_ref: heads {heads} do not divide d_model {d}")
        self.heads, self.norm, self.sdpa = heads, norm, sdpa
        self.act = F.relu if activation == "relu" else F.gelu
        # Constructed in this order so that a seed gives the same initial weights every time.
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln1 = nn.LayerNorm(d)
        self.ff1 = nn.Linear(d, ff)
        self.ff2 = nn.Linear(ff, d)
        self.ln2 = nn.LayerNorm(d)
        self.drop1 = dropout_or_identity(p)
        self.drop2 = dropout_or_identity(p)

    def attention(self, x, mask):  # (B, T, d) -> (B, T, d), before W_O
        B, T, d = x.shape
        d_head = d // self.heads
        q, k, v = self.qkv(x).view(B, T, 3, self.heads, d_head).permute(2, 0, 3, 1, 4)  # (B, h, T, d_head)
        if self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            scores = q @ k.transpose(-2, -1) * (1.0 / math.sqrt(d_head)) + mask  # (B, h, T, T)
            y = torch.softmax(scores, dim=-1) @ v
        return y.transpose(1, 2).reshape(B, T, d)

    def forward(self, x, mask):
        if self.norm == "post":
            x = self.ln1(x + self.drop1(self.proj(self.attention(x, mask))))
            return self.ln2(x + self.drop2(self.ff2(self.act(self.ff1(x)))))
        x = x + self.drop1(self.proj(self.attention(self.ln1(x), mask)))
        return x + self.drop2(self.ff2(self.act(self.ff1(self.ln2(x)))))


def frequency_order(stream, vocab):
    """order[r]: the id of rank r, ids by their count in `stream` descending, ties by ascending id."""
    counts = torch.bincount(stream, minlength=vocab).tolist()
    return torch.tensor(sorted(range(vocab), key=lambda i: (-counts[i], i)), dtype=torch.int64)


def log_softmax_f32(logits):
    """log_softmax over the last dimension, bf16 (autocast) logits taken in float32."""
    low = logits.dtype in (torch.bfloat16, torch.float16)
    return F.log_softmax(logits.float() if low else logits, dim=-1)


class AdaptiveSoftmax(nn.Module):
    """nn.AdaptiveLogSoftmaxWithLoss(d, vocab, cutoffs, div_value=div, head_bias=False) over
    frequency ranks, its head's shortlist rows tied. head.weight is cat(shortlist, cluster_logits):
    the shortlist is the embedding's rows of the c_0 most frequent words (passed in as `shortlist`),
    or with adaptive input this module's own (c_0, d) parameter, which the input shares; tail[i]
    is Sequential(P_i: Linear(d, d_i), W_i: Linear(d_i, s_i)), no biases, as PyTorch's module
    names them. Targets and ids are vocabulary ids, mapped to ranks here."""

    def __init__(self, d, vocab, cutoffs, div, order, adaptive_input=False):
        super().__init__()
        self.cutoffs = list(cutoffs) + [vocab]
        self.shortlist_size, self.clusters = self.cutoffs[0], len(cutoffs)
        self.register_buffer("order", order.clone(), persistent=False)  # rank -> id
        rank = torch.empty_like(order)
        rank[order] = torch.arange(vocab, dtype=order.dtype)
        self.register_buffer("rank", rank, persistent=False)  # id -> rank
        # Constructed in this order so that a seed gives the same initial weights every time.
        self.cluster_logits = nn.Linear(d, self.clusters, bias=False)
        self.tail = nn.ModuleList()
        for i in range(self.clusters):
            d_i = int(d // div ** (i + 1))
            if d_i < 1:
                sys.exit(f"torch_ref: cluster {i} of the adaptive softmax has width d_model // "
                         f"div^{i + 1} = 0 (d_model {d}, div {div})")
            self.tail.append(nn.Sequential(nn.Linear(d, d_i, bias=False),
                                           nn.Linear(d_i, self.cutoffs[i + 1] - self.cutoffs[i], bias=False)))
        self.shortlist = None
        if adaptive_input:
            self.shortlist = nn.Parameter(torch.empty(self.shortlist_size, d))
            nn.init.uniform_(self.shortlist, -0.1, 0.1)

    def head_weight(self, shortlist):  # (c_0 + n, d)
        return torch.cat((shortlist, self.cluster_logits.weight))

    def embed(self, ids):
        """Adaptive input: ids (...) -> (..., d) float32, shortlist[r] for a rank r < c_0 and
        W_i[r - c_i] P_i for a rank in cluster i (the output cluster's very tensors)."""
        ranks = self.rank[ids].reshape(-1)
        out = self.shortlist.new_zeros(ranks.numel(), self.shortlist.size(1))
        for i in range(self.clusters + 1):
            lo, hi = ([0] + self.cutoffs)[i], self.cutoffs[i]
            rows = ((ranks >= lo) & (ranks < hi)).nonzero().squeeze(1)
            if rows.numel() == 0:
                continue
            if i == 0:
                vectors = F.embedding(ranks[rows], self.shortlist)
            else:
                proj, words = self.tail[i - 1]
                vectors = F.embedding(ranks[rows] - lo, words.weight) @ proj.weight
            out = out.index_copy(0, rows, vectors.to(out.dtype))
        return out.view(*ids.shape, -1)

    def nll(self, x, targets, shortlist):
        """-log p(target), x (N, d), targets (N,) ids -> (N,) float32: AdaptiveLogSoftmaxWithLoss's
        forward, the log-softmaxes in float32."""
        ranks = self.rank[targets]
        head = log_softmax_f32(F.linear(x, self.head_weight(shortlist)))
        column = ranks.clone()  # of the head: the rank in the shortlist, else its cluster's logit
        logp = head.new_zeros(ranks.numel())
        for i in range(self.clusters):
            lo, hi = self.cutoffs[i], self.cutoffs[i + 1]
            rows = ((ranks >= lo) & (ranks < hi)).nonzero().squeeze(1)
            if rows.numel() == 0:
                continue
            column[rows] = self.shortlist_size + i
            local = log_softmax_f32(self.tail[i](x[rows]))
            logp = logp.index_copy(0, rows, local.gather(1, (ranks[rows] - lo).unsqueeze(1)).squeeze(1))
        return -(logp + head.gather(1, column.unsqueeze(1)).squeeze(1))

    def log_prob(self, x, shortlist):
        """log p of every word, x (N, d) -> (N, vocab) float32 in vocabulary id order."""
        head = log_softmax_f32(F.linear(x, self.head_weight(shortlist)))
        parts = [head[:, :self.shortlist_size]]
        for i in range(self.clusters):
            cluster = head[:, self.shortlist_size + i:self.shortlist_size + i + 1]
            parts.append(cluster + log_softmax_f32(self.tail[i](x)))
        return torch.cat(parts, dim=1)[:, self.rank]


class TransformerLM(nn.Module):
    """ids (B, T) -> logits (B, T, vocab), the output tied to the embedding; with `cutoffs` an
    adaptive softmax over the ranks of `order` (frequency_order) instead, forward giving log p."""

    def __init__(self, ntoken, d, heads, layers, ff, p, norm="post", activation="relu", sdpa=False,
                 cutoffs=(), div=4.0, order=None, adaptive_input=False, word_dropout=0.0):
        super().__init__()
        self.d = d
        self.ntoken = ntoken
        self.word_dropout = word_dropout
        self.emb = None if adaptive_input else nn.Embedding(ntoken, d)
        self.pos = PositionalEncoding(d)
        self.drop = dropout_or_identity(p)
        self.blocks = nn.ModuleList(
            Block(d, heads, ff, p, norm, activation, sdpa) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d) if norm == "pre" else None
        if self.emb is not None:
            nn.init.uniform_(self.emb.weight, -0.1, 0.1)
        self.out = AdaptiveSoftmax(d, ntoken, cutoffs, div, order, adaptive_input) if cutoffs else None
        self._masks = {}

    def causal_mask(self, T):  # (T, T): 0 on and below the diagonal, -inf above
        mask = self._masks.get(T)
        if mask is None:
            mask = torch.full((T, T), float("-inf"), device=self.pos.pe.device).triu(1)
            self._masks[T] = mask
        return mask

    def shortlist(self):  # the head's shortlist rows: the embedding's rows of the shortlist words
        if self.out.shortlist is not None:
            return self.out.shortlist
        return self.emb.weight[self.out.order[:self.out.shortlist_size]]

    def hidden(self, ids):  # (B, T) -> (B, T, d), the last block's output
        e = self.emb(ids) if self.emb is not None else self.out.embed(ids)
        if self.training and self.word_dropout > 0:
            keep = torch.empty(self.ntoken, 1, device=e.device).bernoulli_(1 - self.word_dropout)
            e = e * (keep / (1 - self.word_dropout))[ids]
        x = self.drop(self.pos(e * math.sqrt(self.d)))
        mask = self.causal_mask(ids.size(1))
        for block in self.blocks:
            x = block(x, mask)
        if self.ln_f is not None:
            x = self.ln_f(x)
        return x

    def forward(self, ids):
        x = self.hidden(ids)
        if self.out is None:
            return F.linear(x, self.emb.weight)
        return self.out.log_prob(x.reshape(-1, self.d), self.shortlist()).view(*ids.shape, -1)

    def loss(self, ids, targets, reduction="mean"):
        """Cross-entropy of the next-token targets (B, T): mean, or sum over every target."""
        if self.out is None:
            logits = self(ids)
            return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1),
                                   reduction=reduction)
        nll = self.out.nll(self.hidden(ids).reshape(-1, self.d), targets.reshape(-1), self.shortlist())
        return nll.mean() if reduction == "mean" else nll.sum()


# -------------------------------------------------------------------------------- measurement
def autocast(device, precision):
    if precision == "bf16":
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


@torch.no_grad()
def evaluate(model, source, seq_len, device=None, precision="f32"):
    """Mean loss per target over a batchified split: non-overlapping windows, every target."""
    was_training = model.training
    model.eval()
    device = device or source.device
    total, count = 0.0, 0
    for row in range(0, source.size(0) - 1, seq_len):
        inputs, targets = get_batch(source, row, seq_len)
        with autocast(device, precision):
            loss = model.loss(inputs, targets, reduction="sum")
        total += loss.item()
        count += targets.numel()
    model.train(was_training)
    return total / count


def blas_description():
    """The BLAS library mapped into this process and, for OpenBLAS, the kernels it chose."""
    path = None
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                name = line.split()[-1]
                if "blas" in os.path.basename(name).lower():
                    path = name
                    break
    except OSError:
        pass
    if path is None:
        return "built in (MKL or none)"
    try:
        import ctypes
        lib = ctypes.CDLL(path)
        lib.openblas_get_corename.restype = ctypes.c_char_p
        return f"{path} (OpenBLAS {lib.openblas_get_corename().decode()} kernels)"
    except (OSError, AttributeError):
        return path


def cpu_times():
    """(CPU seconds of the whole machine, steal seconds, this process's CPU seconds)."""
    ticks = os.sysconf("SC_CLK_TCK")
    with open("/proc/stat") as stat:
        user, nice, system, idle, iowait, irq, softirq, steal = map(int, stat.readline().split()[1:9])
    own = os.times()
    return (user + nice + system + irq + softirq) / ticks, steal / ticks, own.user + own.system


def machine_report(start, wall):
    """What else ran while we trained: a noisy machine shows here."""
    busy0, steal0, own0 = start
    busy1, steal1, own1 = cpu_times()
    others = max(0.0, (busy1 - busy0) - (own1 - own0))
    cpus = os.cpu_count() or 1
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    return (f"other processes used {others:.1f} cpu-s during {wall:.1f}s wall "
            f"({100 * others / max(wall * cpus, 1e-9):.1f}% of {cpus} cpus); steal {steal1 - steal0:.1f}s; "
            f"this process {own1 - own0:.1f} cpu-s; loadavg {load}")


def wsd_decay_start(args, length):
    """The first step of wsd's decay for a schedule of `length` steps (train_lm's, llround)."""
    return max(args.lr_warmup, length - math.floor(args.decay_fraction * length + 0.5))


def schedule_lr(args, step, length):
    """train_lm's learning rate of step `step` (0-based) for a schedule of `length` steps."""
    base, warm = args.lr, args.lr_warmup
    if args.schedule == "constant" or step < warm:
        return base * (min(step + 1, warm) / warm if warm > 0 else 1.0)
    if step >= length:
        return args.min_lr
    if args.schedule == "cosine":
        progress = (step - warm) / (length - warm)
        return args.min_lr + 0.5 * (base - args.min_lr) * (1 + math.cos(math.pi * progress))
    start = wsd_decay_start(args, length)
    if step < start:
        return base
    return args.min_lr + (base - args.min_lr) * (length - step) / (length - start)


def make_adam(params, args):
    """torch.optim.Adam, fused when asked for and the installed PyTorch has it for this device."""
    options = dict(lr=args.lr, betas=(args.beta1, args.beta2), eps=args.eps)
    if args.fused_adam:
        try:
            return torch.optim.Adam(params, fused=True, **options), "fused"
        except (TypeError, RuntimeError) as e:
            print(f"torch_ref: no fused Adam here ({str(e).splitlines()[0]}); using the default",
                  flush=True)
    return torch.optim.Adam(params, **options), "default"


# ------------------------------------------------------------------------------------- main
def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=DEFAULT_DATA,
                    help="folder with train.txt, valid.txt, test.txt (default: $KILN_DATA, else datasets/wikitext-2)")
    ap.add_argument("--d-model", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--ff", type=int, default=1024)
    ap.add_argument("--seq-len", "--bptt", "-T", dest="seq_len", type=int, default=64)
    ap.add_argument("--batch-size", "--batch", "-B", dest="batch_size", type=int, default=32)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--norm", choices=("post", "pre"), default="post")
    ap.add_argument("--activation", choices=("relu", "gelu"), default="relu")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.999)
    ap.add_argument("--eps", type=float, default=1e-8)
    ap.add_argument("--clip", type=float, default=1.0, help="global gradient-norm clip (<= 0: none)")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--steps", type=int, default=0, help="stop after N steps (0: no limit)")
    ap.add_argument("--time-budget", type=float, default=0.0,
                    help="stop after this many seconds of training (0: no limit)")
    ap.add_argument("--epochs", type=int, default=0,
                    help="stop after N epochs (0: one epoch when neither --steps nor --time-budget is set)")
    ap.add_argument("--warmup", type=int, default=5, help="first steps left out of tokens/s")
    ap.add_argument("--schedule", choices=("constant", "cosine", "wsd"), default="constant")
    ap.add_argument("--lr-warmup", type=int, default=0, help="steps of linear lr warm-up")
    ap.add_argument("--min-lr", type=float, default=0.0, help="cosine and wsd: the final lr")
    ap.add_argument("--decay-fraction", type=float, default=0.2, help="wsd: the decaying share")
    ap.add_argument("--decay-steps", type=int, default=0,
                    help="cosine and wsd: the schedule's length (0: --steps, else fitted to --time-budget)")
    ap.add_argument("--word-dropout", type=float, default=0.0, help="word (embedding) dropout")
    ap.add_argument("--shuffle", action="store_true", help="the windows in a new random order each epoch")
    ap.add_argument("--log-interval", type=int, default=50, help="a step line every N steps")
    ap.add_argument("--eval", action="store_true", help="valid and test perplexity after training")
    ap.add_argument("--eval-batch", type=int, default=10)
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: every core)")
    ap.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    ap.add_argument("--precision", choices=("f32", "bf16"), default="f32",
                    help="bf16: forward and loss under torch.autocast(dtype=torch.bfloat16)")
    ap.add_argument("--sdpa", action="store_true",
                    help="attention through F.scaled_dot_product_attention(is_causal=True) (PyTorch 2)")
    ap.add_argument("--fused-adam", action="store_true", help="torch.optim.Adam(fused=True) where available")
    ap.add_argument("--adaptive-softmax", default="", metavar="CUTOFFS",
                    help="adaptive softmax with these increasing cutoffs in frequency ranks, e.g. "
                         "2000,10000 (default: none, the full tied softmax)")
    ap.add_argument("--adaptive-div", type=float, default=4.0,
                    help="cluster i of the adaptive softmax is d_model // div^(i+1) wide")
    ap.add_argument("--input", choices=("embedding", "adaptive"), default="embedding",
                    help="input layer: the embedding, or adaptive input sharing the adaptive "
                         "softmax's shortlist and clusters (needs --adaptive-softmax)")
    args = ap.parse_args(argv)
    args.adaptive_input = args.input == "adaptive"
    try:
        args.cutoffs = [int(c) for c in args.adaptive_softmax.split(",")] if args.adaptive_softmax else []
    except ValueError:
        ap.error(f"--adaptive-softmax: '{args.adaptive_softmax}' is not a comma-separated list of "
                 "integers such as 2000,10000")
    if any(b <= a for a, b in zip([0] + args.cutoffs, args.cutoffs)):
        ap.error(f"--adaptive-softmax: cutoffs {args.adaptive_softmax} must increase from above 0")
    if args.adaptive_div <= 0:
        ap.error("--adaptive-div must be positive")
    if args.adaptive_input and not args.cutoffs:
        ap.error("--input adaptive needs --adaptive-softmax")
    if args.schedule != "constant" and not (args.decay_steps or args.steps or args.time_budget):
        ap.error(f"--schedule {args.schedule} needs --decay-steps, --steps or --time-budget")
    if args.sdpa and not hasattr(F, "scaled_dot_product_attention"):
        ap.error(f"--sdpa needs PyTorch 2 (this is {torch.__version__}; bench/run_torch_pypi.sh has it)")
    return args


def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(args.threads if args.threads > 0 else (os.cpu_count() or 1))
    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    cuda = device.type == "cuda"

    def sync():
        if cuda:
            torch.cuda.synchronize(device)

    print(f"torch {torch.__version__} | python {sys.version.split()[0]} | threads {torch.get_num_threads()} "
          f"| device {device} | blas {blas_description()} | precision {args.precision} "
          f"| attention {'sdpa' if args.sdpa else 'materialised'} "
          f"| OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '')}", flush=True)
    print("args: " + " ".join(f"{k}={v}" for k, v in vars(args).items()), flush=True)

    start = time.perf_counter()
    corpus = Corpus(args.data)
    vocab = len(corpus.dictionary)
    print(f"data: vocab {vocab} | train {corpus.train.numel()} valid {corpus.valid.numel()} "
          f"test {corpus.test.numel()} tokens | load {time.perf_counter() - start:.1f}s", flush=True)
    train_data = batchify(corpus.train, args.batch_size).to(device)
    if args.cutoffs and args.cutoffs[-1] >= vocab:
        sys.exit(f"torch_ref: --adaptive-softmax cutoffs {args.adaptive_softmax} must be below the "
                 f"vocabulary size {vocab}")

    model = TransformerLM(vocab, args.d_model, args.heads, args.layers, args.ff, args.dropout,
                          args.norm, args.activation, args.sdpa, args.cutoffs, args.adaptive_div,
                          frequency_order(corpus.train, vocab) if args.cutoffs else None,
                          args.adaptive_input, args.word_dropout).to(device)
    params = sum(p.numel() for p in model.parameters())
    optimizer, adam_kind = make_adam(list(model.parameters()), args)
    if model.out is None:
        output = ""
        embedding = model.emb.weight.numel()
        parts = f"embedding {embedding:,}, non-embedding {params - embedding:,}"
    else:
        # The input's tensors (shared with the output where tied), the output's own, the rest.
        tails = sum(p.numel() for p in model.out.tail.parameters())
        clusters = model.out.cluster_logits.weight.numel()
        if args.adaptive_input:
            embedding, softmax_only = model.out.shortlist.numel() + tails, clusters
        else:
            embedding, softmax_only = model.emb.weight.numel(), clusters + tails
        output = (f" adaptive={args.adaptive_softmax} div={args.adaptive_div} "
                  f"input={'adaptive' if args.adaptive_input else 'embedding'}")
        parts = (f"embedding {embedding:,}, adaptive softmax beyond it {softmax_only:,}, "
                 f"non-embedding {params - embedding - softmax_only:,}")
    print(f"model: d={args.d_model} h={args.heads} L={args.layers} ff={args.ff} T={args.seq_len} "
          f"B={args.batch_size} dropout={args.dropout} norm={args.norm} activation={args.activation}"
          f"{output} adam={adam_kind} | parameters {params:,} ({parts})", flush=True)

    epochs = args.epochs or (1 if args.steps == 0 and args.time_budget == 0 else sys.maxsize)
    step, epoch, tokens = 0, 0, 0
    measured_tokens, measured_from = 0, None
    interval_sum, interval_steps, last = 0.0, 0, float("nan")
    machine_start = cpu_times()
    model.train()
    length = args.decay_steps or args.steps or None  # None: fitted to --time-budget below
    window_order = torch.Generator().manual_seed(args.seed)
    train_start = time.perf_counter()
    rate_from = None
    done = False
    while not done and epoch < epochs:
        epoch += 1
        rows = list(range(0, train_data.size(0) - 1, args.seq_len))
        if args.shuffle:
            rows = [rows[i] for i in torch.randperm(len(rows), generator=window_order).tolist()]
        for row in rows:
            inputs, targets = get_batch(train_data, row, args.seq_len)
            with autocast(device, args.precision):
                loss = model.loss(inputs, targets)
            if args.schedule != "constant":
                for group in optimizer.param_groups:
                    group["lr"] = schedule_lr(args, step, length or 1 << 52)
            elif args.lr_warmup:
                for group in optimizer.param_groups:
                    group["lr"] = schedule_lr(args, step, 1)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if args.clip > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
            optimizer.step()
            last = loss.item()  # waits for the step, on a GPU too: the clock below is honest

            step += 1
            tokens += targets.numel()
            interval_sum += last
            interval_steps += 1
            now = time.perf_counter()
            if length is None and args.schedule != "constant":
                # train_lm's Trainer::fix_length_from_budget, one rank: the length is fixed right
                # before the first step whose lr depends on it, by the rate timed so far
                if step == 1:
                    rate_from = now
                timed = step - 1
                per_step = (now - rate_from) / timed if timed > 0 else (now - train_start) / step
                left = max(0.0, args.time_budget - (now - train_start))
                estimate = step + 1 + int(min(left // per_step, 1 << 30))
                if args.schedule == "cosine":
                    fix = step + 1 >= args.lr_warmup + 1
                else:
                    fix = step + 1 >= wsd_decay_start(args, estimate) and timed >= 10
                while args.schedule == "wsd" and wsd_decay_start(args, estimate) < step:
                    estimate += 1
                if fix:
                    length = estimate
                    print(f"schedule: {args.schedule} over {length} steps, fitted to --time-budget "
                          f"{args.time_budget}s at {per_step:.4f}s a step", flush=True)
            if step == args.warmup:
                measured_from = now
            elif step > args.warmup:
                measured_tokens += targets.numel()
            if step % args.log_interval == 0:
                mean = interval_sum / interval_steps
                rate = (measured_tokens / (now - measured_from)
                        if measured_from is not None and measured_tokens else float("nan"))
                print(f"step {step:6d} | epoch {epoch} | {now - train_start:7.1f}s | loss {mean:.4f} "
                      f"| ppl {math.exp(mean):9.2f} | last {last:.4f} | {rate:8.1f} tok/s", flush=True)
                interval_sum, interval_steps = 0.0, 0
            done = (args.steps > 0 and step >= args.steps) or \
                (args.time_budget > 0 and now - train_start >= args.time_budget)
            if done:
                break

    sync()
    train_end = time.perf_counter()
    train_seconds = train_end - train_start
    if measured_from is not None and measured_tokens:
        seconds = train_end - measured_from
        measured_steps = step - args.warmup
        print(f"RESULT train_tokens_per_sec {measured_tokens / seconds:.1f} | measured steps {measured_steps} "
              f"({measured_tokens} tokens in {seconds:.2f}s, {1000 * seconds / measured_steps:.1f} ms/step) "
              f"| excluded warm-up steps {args.warmup}", flush=True)
    else:
        print("RESULT train_tokens_per_sec n/a (no steps after the warm-up)", flush=True)
    print(f"RESULT steps {step} | epochs {epoch} (last partial) | train tokens {tokens} "
          f"| train wall {train_seconds:.1f}s | final loss {last:.4f}", flush=True)
    print("RESULT machine: " + machine_report(machine_start, train_seconds), flush=True)

    if args.eval:
        times, losses = [], []
        for split in (corpus.valid, corpus.test):
            t0 = time.perf_counter()
            losses.append(evaluate(model, batchify(split, args.eval_batch).to(device), args.seq_len,
                                   device, args.precision))
            times.append(time.perf_counter() - t0)
        print(f"RESULT valid loss {losses[0]:.4f} ppl {math.exp(losses[0]):.2f} ({times[0]:.1f}s) "
              f"| test loss {losses[1]:.4f} ppl {math.exp(losses[1]):.2f} ({times[1]:.1f}s)", flush=True)


if __name__ == "__main__":
    main()
