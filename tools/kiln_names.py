"""Parameter names of kiln's TransformerLM and of bench/torch_ref.py's model.

kiln names follow its module tree (docs/checkpoint-format.md); torch_ref.py names follow its
PyTorch modules. Both store Linear weights (out, in) and the fused QKV rows in the order
Q heads, K heads, V heads, so tensors map one to one without any transposition.
"""

_BLOCK_PARTS = {
    "attn.qkv": "qkv",
    "attn.out": "proj",
    "norm1": "ln1",
    "ffn.fc1": "ff1",
    "ffn.fc2": "ff2",
    "norm2": "ln2",
}


# The adaptive softmax (nn/adaptive_softmax.h; torch_ref.py's AdaptiveSoftmax, "out"). Its order
# buffer, adaptive.order, is no parameter: torch_ref.py takes it as an argument.
_ADAPTIVE = {
    "adaptive.shortlist": "out.shortlist",
    "adaptive.cluster_logits": "out.cluster_logits.weight",
}
_CLUSTER_PARTS = {"projection": "0", "output": "1"}


def kiln_to_torch(name):
    """torch_ref.py's name for a kiln parameter name (KeyError for names it does not have)."""
    if name == "embedding.weight":
        return "emb.weight"
    if name in _ADAPTIVE:
        return _ADAPTIVE[name]
    parts = name.split(".")
    if parts[:2] == ["adaptive", "clusters"] and len(parts) == 4 and parts[3] in _CLUSTER_PARTS:
        return f"out.tail.{parts[2]}.{_CLUSTER_PARTS[parts[3]]}.weight"
    if parts[0] == "blocks":
        layer, rest = parts[1], ".".join(parts[2:])
        for kiln_part, torch_part in _BLOCK_PARTS.items():
            if rest.startswith(kiln_part + "."):
                return f"blocks.{layer}.{torch_part}{rest[len(kiln_part):]}"
    raise KeyError(f"no torch_ref.py name for kiln parameter '{name}'")


def torch_to_kiln(name):
    """kiln's name for a torch_ref.py parameter name."""
    if name == "emb.weight":
        return "embedding.weight"
    for kiln_name, torch_name in _ADAPTIVE.items():
        if name == torch_name:
            return kiln_name
    parts = name.split(".")
    if parts[:2] == ["out", "tail"] and len(parts) == 5:
        for kiln_part, torch_part in _CLUSTER_PARTS.items():
            if parts[3] == torch_part:
                return f"adaptive.clusters.{parts[2]}.{kiln_part}"
    if parts[0] == "blocks":
        layer, module, leaf = parts[1], parts[2], ".".join(parts[3:])
        for kiln_part, torch_part in _BLOCK_PARTS.items():
            if module == torch_part:
                return f"blocks.{layer}.{kiln_part}.{leaf}"
    raise KeyError(f"no kiln name for torch_ref.py parameter '{name}'")
