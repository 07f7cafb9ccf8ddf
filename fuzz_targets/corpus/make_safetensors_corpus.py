#!/usr/bin/env python3
"""Writes the seed corpus of safetensors_fuzz: valid files of every dtype and layout, and the
broken files of tests/io/safetensors_test.cpp (one of each kind of damage), each small.
Run from anywhere: python3 fuzz_targets/corpus/make_safetensors_corpus.py"""
import json
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "safetensors")


def image(header, data=b"", header_len=None, pad=True):
    text = header if isinstance(header, bytes) else header.encode()
    if pad:
        text += b" " * ((8 - len(text) % 8) % 8)
    n = len(text) if header_len is None else header_len
    return struct.pack("<Q", n) + text + data


def valid(tensors, metadata=None):
    """tensors: list of (name, dtype, shape, bytes), laid out in order."""
    header, data = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    return image(json.dumps(header, separators=(",", ":")), data)


def f32(name, shape, b, e):
    return f'"{name}":{{"dtype":"F32","shape":{shape},"data_offsets":[{b},{e}]}}'


def seeds():
    d8 = bytes(8)
    one = "{" + f32("a", "[2]", 0, 8) + "}"
    yield "valid_every_dtype", valid([
        ("f32", "F32", [2, 3], struct.pack("<6f", 1.5, -2.25, 3e-8, 1e30, -0.0, 7.0)),
        ("f64", "F64", [3], struct.pack("<3d", 3.14159, -1e-300, 42.0)),
        ("i64", "I64", [2, 2], struct.pack("<4q", -2**63, -1, 0, 2**63 - 1)),
        ("bool", "BOOL", [5], bytes([1, 0, 0, 1, 1])),
        ("u8", "U8", [2, 2], bytes([0, 1, 128, 255])),
        ("scalar", "F64", [], struct.pack("<d", 0.125)),
        ("empty", "F32", [0, 3], b""),
    ], {"format": "pt", "note": "\u00fcn\u00efcode ok"})
    yield "valid_one", valid([("w", "F32", [1], struct.pack("<f", 1.0))])
    yield "valid_empty_header", image("{}")
    yield "valid_metadata_only", image('{"__metadata__":{"k":"v"}}')
    # Another writer's layout: entries out of order, no padding.
    yield "valid_unordered_unpadded", image(
        '{"w":{"dtype":"I64","shape":[2],"data_offsets":[4,20]},'
        '"m":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}}',
        bytes([1, 2, 3, 4]) + struct.pack("<2q", -7, 9), pad=False)
    yield "bad_too_short", b"\x05\x00\x00"
    yield "bad_zero_header_length", image("", d8, 0, pad=False)
    yield "bad_header_past_end", image(one, d8, 5000)
    yield "bad_absurd_header_length", image(one, d8, 1 << 62)
    yield "bad_not_json", image('{"a": [1, 2', pad=False)
    yield "bad_binary_header", image(b"\xff\xfe\x00\x13garbage", pad=False)
    yield "bad_array_header", image("[1, 2, 3]")
    yield "bad_entry_not_object", image('{"a": 3}')
    yield "bad_missing_field", image('{"a":{"dtype":"F32","shape":[2]}}', d8)
    yield "bad_unknown_field", image('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}}', d8)
    yield "bad_unknown_dtype", image('{"a":{"dtype":"F99","shape":[2],"data_offsets":[0,8]}}', d8)
    yield "bad_unsupported_dtype", image('{"a":{"dtype":"BF16","shape":[4],"data_offsets":[0,8]}}', d8)
    yield "bad_dtype_not_string", image('{"a":{"dtype":7,"shape":[2],"data_offsets":[0,8]}}', d8)
    yield "bad_negative_dim", image("{" + f32("a", "[-2]", 0, 8) + "}", d8)
    yield "bad_fractional_dim", image("{" + f32("a", "[2.5]", 0, 8) + "}", d8)
    yield "bad_shape_overflow", image("{" + f32("a", "[4294967296,4294967296,4294967296]", 0, 8) + "}", d8)
    yield "bad_zero_dim_overflow", image("{" + f32("a", "[0,4294967296,4294967296]", 0, 0) + "}")
    yield "bad_offsets_vs_shape", image("{" + f32("a", "[3]", 0, 8) + "}", d8)
    yield "bad_offsets_reversed", image("{" + f32("a", "[0]", 8, 4) + "}", d8)
    yield "bad_offsets_malformed", image('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0]}}', d8)
    yield "bad_truncated_data", image(one, bytes(5))
    yield "bad_overlap", image("{" + f32("a", "[2]", 0, 8) + "," + f32("b", "[2]", 4, 12) + "}", bytes(12))
    yield "bad_gap", image("{" + f32("a", "[1]", 0, 4) + "," + f32("b", "[1]", 8, 12) + "}", bytes(12))
    yield "bad_trailing_bytes", image(one, bytes(16))
    yield "bad_duplicate_name", image("{" + f32("a", "[1]", 0, 4) + "," + f32("a", "[1]", 4, 8) + "}", d8)
    yield "bad_metadata_not_strings", image('{"__metadata__":{"k":1}}')
    yield "bad_bool_value", image('{"m":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}}', b"\x01\x02")
    yield "bad_nul_then_junk", image(one.encode() + b"\x00junk}", d8, pad=False)
    yield "bad_deep_nesting", image('{"a":' + "[" * 200 + "]" * 200 + "}")
    yield "bad_long_name", image("{" + f32("n" * 300, "[3]", 0, 8) + "}", d8)
    yield "bad_tab_padding", image(one + "\t", d8, pad=False)


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, data in seeds():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
