#!/usr/bin/env bash
# bench/torch_ref.py under the current PyTorch from PyPI, as `pip install torch` gives it (on x86
# Linux: MKL and oneDNN inside; on a machine with a GPU, the CUDA build), in a virtual
# environment made on first use at $KILN_TORCH_VENV (default ~/.cache/kiln-torch-venv; the first
# run downloads a few GB). Arguments go to torch_ref.py; pass --threads explicitly.
# bench/compare_torch.sh runs this and run_torch_ref.sh (Debian's) and compares kiln with the
# faster of the two.
#
#   bench/run_torch_pypi.sh --threads 2 --steps 100
#   bench/run_torch_pypi.sh --device cuda --sdpa --fused-adam --precision bf16 --steps 200
set -euo pipefail
bench=$(cd "$(dirname "$0")" && pwd)
venv=${KILN_TORCH_VENV:-$HOME/.cache/kiln-torch-venv}
if ! "$venv/bin/python" -c 'import torch, numpy' 2>/dev/null; then
  echo "run_torch_pypi: installing torch and numpy into $venv" >&2
  python3 -m venv "$venv" || { echo "run_torch_pypi: python3 -m venv failed (apt-get install python3-venv)" >&2; exit 1; }
  "$venv/bin/pip" install -q --upgrade pip >&2
  "$venv/bin/pip" install -q torch numpy >&2
fi
exec "$venv/bin/python" "$bench/torch_ref.py" "$@"
