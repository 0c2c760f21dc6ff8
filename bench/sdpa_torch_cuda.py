#!/usr/bin/env python3
"""PyTorch's scaled_dot_product_attention on a GPU, beside kiln's tensor-core attention.

Causal attention with bf16 q, k, v (B, heads, T, d_head) on CUDA, at FlashAttention-2's
benchmark shapes (B = 16384 / T, heads = 2048 / d_head), timed with CUDA events, forward and
backward separately, and printed in the format of kiln's tests/cuda/bench_attention.cpp:

  RESULT torch_sdpa_bf16_fwd_T1024_d64_tflops 312.5
  RESULT torch_sdpa_bf16_bwd_T1024_d64_tflops 201.7

with kiln's flop count: 4 B heads d_head per visible (query, key) pair, T (T + 1) / 2 pairs,
forward; 2.5 times that backward. scripts/gpu_check.sh runs it on the GPU machine, whose
PyTorch is 2.x (docs/gpu-check.md).
"""
import argparse
import sys


def median_ms(fn, repeats):
    import torch

    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq-lens", type=int, nargs="+", default=[1024, 4096])
    parser.add_argument("--d-heads", type=int, nargs="+", default=[64, 128])
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()

    import torch
    import torch.nn.functional as F

    if not torch.cuda.is_available():
        sys.exit("sdpa_torch_cuda.py: no CUDA device")
    print(f"# torch {torch.__version__} on {torch.cuda.get_device_name()}", flush=True)
    for T in args.seq_lens:
        for d in args.d_heads:
            batch, heads = max(16384 // T, 1), max(2048 // d, 1)
            q, k, v = (torch.randn(batch, heads, T, d, device="cuda", dtype=torch.bfloat16,
                                   requires_grad=True) for _ in range(3))
            grad = torch.randn_like(q)
            forward_flops = 4.0 * batch * heads * d * T * (T + 1) / 2

            def forward():
                with torch.no_grad():
                    F.scaled_dot_product_attention(q, k, v, is_causal=True)

            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)

            def backward():
                torch.autograd.grad(out, (q, k, v), grad, retain_graph=True)

            fwd = median_ms(forward, args.repeats)
            bwd = median_ms(backward, args.repeats)
            print(f"RESULT torch_sdpa_bf16_fwd_T{T}_d{d}_tflops {forward_flops / fwd / 1e9:.1f}")
            print(f"RESULT torch_sdpa_bf16_bwd_T{T}_d{d}_tflops "
                  f"{2.5 * forward_flops / bwd / 1e9:.1f}", flush=True)
            del q, k, v, grad, out
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
