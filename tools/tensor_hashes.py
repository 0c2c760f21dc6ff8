#!/usr/bin/python3
"""Prints a SHA-256 of every tensor in a safetensors file, and one of them all in name order.

    tools/tensor_hashes.py run.safetensors [more.safetensors ...]

The metadata (elapsed time, thread count, the settings) is left out: two runs that trained the
same weights and optimizer state print the same lines whatever their clocks said. Used for the
bit-identity checks in docs (a training run before and after a refactoring). Standard library
only.
"""

import hashlib
import json
import struct
import sys


def tensor_hashes(path):
    with open(path, "rb") as f:
        (header_bytes,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(header_bytes))
        data = f.read()
    header.pop("__metadata__", None)
    hashes = {}
    for name in sorted(header):
        begin, end = header[name]["data_offsets"]
        hashes[name] = hashlib.sha256(data[begin:end]).hexdigest()
    return hashes


def main(paths):
    for path in paths:
        hashes = tensor_hashes(path)
        everything = hashlib.sha256()
        for name, digest in hashes.items():
            print(f"{digest[:16]}  {name}")
            everything.update(f"{name} {digest}\n".encode())
        print(f"{everything.hexdigest()}  {path} ({len(hashes)} tensors)")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
