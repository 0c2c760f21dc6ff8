#!/usr/bin/env python3
"""PyTorch's scaled_dot_product_attention on the shapes of bench_ops's attention rows.

Times forward + backward of causal attention, q, k, v (B, heads, T, d_head) float32 on the CPU,
and prints one line per T in bench_ops's format:

  attention_torch_sdpa T 1024 B 4 heads 8 d 64 threads 2 fwd+bwd median 812.3 ms min 800.1 ms \
      peak_rss_growth 35.2 MB

Each T runs in a fresh process, so the peak RSS growth (ru_maxrss after the runs minus the
resident size before them, inputs included) is that T's own. PyTorch 2.x is needed
(torch.nn.functional.scaled_dot_product_attention; Debian's 1.13 lacks it): run it with the
virtual environment of bench/run_torch_pypi.sh, e.g.

  ~/.cache/kiln-torch-venv/bin/python bench/sdpa_torch.py --threads 2
"""
import argparse
import resource
import subprocess
import sys
import time


def rss_mb():
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * resource.getpagesize() / 2**20


def run_one(T, batch, heads, d, threads, repeats):
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(threads)
    gen = torch.Generator().manual_seed(1)
    before = rss_mb()
    q, k, v = (torch.rand(batch, heads, T, d, generator=gen, requires_grad=True) for _ in range(3))
    grad = torch.rand(batch, heads, T, d, generator=gen)

    def step():
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        out.backward(grad)
        for t in (q, k, v):
            t.grad = None

    step()  # warm-up
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        seconds.append(time.perf_counter() - start)
    seconds.sort()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KB -> MB
    print(f"attention_torch_sdpa T {T} B {batch} heads {heads} d {d} threads {threads} "
          f"fwd+bwd median {1e3 * seconds[len(seconds) // 2]:.1f} ms "
          f"min {1e3 * seconds[0]:.1f} ms peak_rss_growth {peak - before:.1f} MB "
          f"(torch {torch.__version__})", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq-lens", type=int, nargs="+", default=[256, 1024, 4096])
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--d-head", type=int, default=64)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # child: one T
    args = parser.parse_args()
    if args.one is not None:
        run_one(args.one, args.batch, args.heads, args.d_head, args.threads[0], args.repeats)
        return
    for threads in args.threads:
        for T in args.seq_lens:
            subprocess.run([sys.executable, __file__, "--one", str(T), "--batch", str(args.batch),
                            "--heads", str(args.heads), "--d-head", str(args.d_head),
                            "--threads", str(threads), "--repeats", str(args.repeats)],
                           check=True)


if __name__ == "__main__":
    main()
