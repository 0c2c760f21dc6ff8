#!/usr/bin/python3
"""Checks a safetensors file the way the reference reader does, plus kiln's checksum.

    tools/check_safetensors.py model.safetensors

Rules (docs/checkpoint-format.md): an 8-byte little-endian header length N (at most 100 MB,
within the file); N bytes of UTF-8 JSON starting with '{' that form an object without duplicate
keys; per tensor exactly the fields dtype (F32, F64, I64 or BF16), shape (non-negative
integers) and data_offsets [begin, end] with end - begin = elements x dtype size; the tensors
tile the data buffer from 0 with no gaps or overlaps and the file ends at the last tensor's
last byte; an optional "__metadata__" object whose values are all strings. When the metadata
has kiln's "checksum" (8 hex digits), zlib.crc32 must reproduce it: the CRC-32 of the tensors'
bytes taken in the order of their names (or, as kiln wrote it before, of the data buffer in file
order).

Every tensor's values are then read (the standard library's array module). Prints one line per
tensor (name, dtype, shape) in data order and a summary; exits 0 when the file is valid, 1 with
a message on stderr when it is not. Needs only the standard library: any python3 will do.
"""

import array
import json
import sys
import zlib

MAX_HEADER_BYTES = 100_000_000  # the reference reader's limit
# safetensors dtype: (array typecode, bytes per element); the values are little-endian. The
# array module has no bfloat16: BF16 values are read as their 16-bit patterns.
DTYPES = {"F32": ("f", 4), "F64": ("d", 8), "I64": ("q", 8), "BF16": ("H", 2)}
FIELDS = {"dtype", "shape", "data_offsets"}


class Invalid(Exception):
    pass


def object_without_duplicates(pairs):
    result = {}
    for key, value in pairs:
        if key in result:
            raise Invalid(f"the header lists '{key}' twice (duplicate name)")
        result[key] = value
    return result


def reject_constant(name):
    raise Invalid(f"the header contains {name}, which is not JSON")


def is_count(value):
    # JSON true/false arrive as bool, a subclass of int: not a count.
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def parse_entry(name, info):
    if name == "":
        raise Invalid("a tensor has an empty name")
    if not isinstance(info, dict):
        raise Invalid(f"tensor '{name}' is described by {type(info).__name__}, not an object")
    if set(info) != FIELDS:
        raise Invalid(f"tensor '{name}' has fields {sorted(info)}, expected {sorted(FIELDS)}")
    dtype, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
    if dtype not in DTYPES:
        raise Invalid(f"tensor '{name}': unknown dtype {dtype!r} "
                      "(kiln reads F32, F64, I64 and BF16)")
    if not isinstance(shape, list) or not all(is_count(n) for n in shape):
        raise Invalid(f"tensor '{name}': shape {shape} is not a list of non-negative integers")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(is_count(n) for n in offsets)):
        raise Invalid(f"tensor '{name}': data_offsets {offsets} is not a pair [begin, end]")
    begin, end = offsets
    if end < begin:
        raise Invalid(f"tensor '{name}': data_offsets [{begin}, {end}] end before they begin")
    count = 1
    for n in shape:
        count *= n
    nbytes = count * DTYPES[dtype][1]
    if nbytes >= 2**64:
        raise Invalid(f"tensor '{name}': shape {shape} overflows")
    if end - begin != nbytes:
        raise Invalid(f"tensor '{name}': shape {shape} of {dtype} needs {nbytes} bytes, "
                      f"but data_offsets [{begin}, {end}] hold {end - begin}")
    return (begin, end, name, dtype, tuple(shape))


def checksum_by_name(entries, buffer):
    """kiln's checksum: CRC-32 of the tensors' bytes, tensors sorted by name (byte-wise on their
    UTF-8, which is code-point order, as Python sorts str), whatever their order in the file."""
    crc = 0
    for begin, end, _, _, _ in sorted(entries, key=lambda e: e[2].encode("utf-8")):
        crc = zlib.crc32(buffer[begin:end], crc)
    return f"{crc:08x}"


def load_values(data, dtype, shape):
    """The tensor's values as an array (flat, C order); raises Invalid if they do not fill it."""
    code, size = DTYPES[dtype]
    values = array.array(code)
    if values.itemsize != size:
        raise Invalid(f"this Python's array '{code}' has {values.itemsize} bytes, not {size}")
    values.frombytes(data)
    if sys.byteorder != "little":
        values.byteswap()
    count = 1
    for n in shape:
        count *= n
    if len(values) != count:
        raise Invalid(f"{len(values)} values do not fill shape {list(shape)}")
    return values


def check_tiling(entries, data_size):
    covered, previous = 0, None
    for begin, end, name, _, _ in entries:
        if begin < covered:
            raise Invalid(f"tensor '{name}' (bytes [{begin}, {end})) overlaps tensor '{previous}'")
        if begin > covered:
            raise Invalid(f"a gap of {begin - covered} bytes before tensor '{name}' "
                          f"(the tensors must tile the data buffer from 0)")
        covered, previous = end, name
    if covered > data_size:
        raise Invalid(f"the file is truncated: its tensors need {covered} bytes of data, "
                      f"but only {data_size} follow the header")
    if covered < data_size:
        raise Invalid(f"{data_size - covered} trailing bytes after the last tensor")


def read(path):
    """Checks the file and returns (metadata, tensors, checksum line, data bytes): tensors maps
    each name, in data order, to (dtype, shape, values). Raises Invalid or OSError."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise Invalid(f"the file is {len(data)} bytes, shorter than the 8-byte header length")
    n = int.from_bytes(data[:8], "little")
    if n > MAX_HEADER_BYTES:
        raise Invalid(f"header length {n} is over the {MAX_HEADER_BYTES}-byte limit")
    if n > len(data) - 8:
        raise Invalid(f"header length {n} runs past the end of the file")
    raw_header = data[8:8 + n]
    if not raw_header.startswith(b"{"):
        raise Invalid("the header is not a JSON object: it must start with '{'")
    try:
        text = raw_header.decode("utf-8")
    except UnicodeDecodeError as e:
        raise Invalid(f"the header is not valid UTF-8 (byte {e.start})") from None
    try:
        header = json.loads(text, object_pairs_hook=object_without_duplicates,
                            parse_constant=reject_constant)
    except json.JSONDecodeError as e:
        raise Invalid(f"the header is not valid JSON: {e}") from None

    metadata = header.pop("__metadata__", None)
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict):
        raise Invalid("__metadata__ is not an object")
    for key, value in metadata.items():
        if not isinstance(value, str):
            raise Invalid(f"metadata value of '{key}' is {type(value).__name__}, not a string")

    entries = sorted(parse_entry(name, info) for name, info in header.items())
    check_tiling(entries, len(data) - 8 - n)

    buffer = memoryview(data)[8 + n:]
    checksum = "no checksum"
    if "checksum" in metadata:
        expected = metadata["checksum"].lower()
        by_name = checksum_by_name(entries, buffer)
        file_order = f"{zlib.crc32(buffer):08x}"
        if expected not in (by_name, file_order):
            raise Invalid(f"checksum mismatch: the header says {expected}, the data gives "
                          f"{by_name} (tensors by name; {file_order} in file order)")
        checksum = f"checksum {expected} verified"

    tensors = {}
    for begin, end, name, dtype, shape in entries:
        tensors[name] = (dtype, shape, load_values(buffer[begin:end], dtype, shape))
    return metadata, tensors, checksum, len(buffer)


def check(path):
    metadata, tensors, checksum, data_bytes = read(path)
    for name, (dtype, shape, _) in tensors.items():
        print(f"{name} {dtype} {list(shape)}")
    elements = sum(len(values) for _, _, values in tensors.values())
    print(f"metadata: {', '.join(sorted(metadata)) or '(none)'}")
    print(f"OK {path}: {len(tensors)} tensors, {elements} elements, {data_bytes} data bytes, "
          f"{checksum}")


def main():
    if len(sys.argv) != 2:
        print(f"usage: {sys.argv[0]} FILE.safetensors", file=sys.stderr)
        return 2
    try:
        check(sys.argv[1])
    except (Invalid, OSError) as e:
        print(f"INVALID {sys.argv[1]}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
