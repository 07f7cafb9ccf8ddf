"""Reference values of quantized inference from PyTorch (its oneDNN engine: the one Debian's python3-torch has on x86).

Written to tests/golden/quantize.json by make_golden.py (tests/ops/quantize_golden_test.cpp
reads it). Each case is one of:

    {"name", "kind": "quantize", "x", "scale": [..], "zero_point": [..], "axis", "q"}
    {"name", "kind": "linear" | "conv", "x" (uint8), "x_scale", "x_zero_point",
     "w" (int8), "w_scale": [..], "w_zero_point": [..], "y_scale", "y_zero_point",
     "stride", "padding", "dilation", "groups" (conv), "y" (uint8)}

Scales are powers of two in the quantize cases: PyTorch multiplies by the reciprocal of the
scale where ONNX (and smelt) divides by it, which agree exactly only then. `q`, `y` are PyTorch's
integer representations (int_repr()); linear and conv run torch.ops.quantized with no bias.
"""
import json
import zlib

import torch

from golden_format import encode_tensor


def generator(name):
    return torch.Generator().manual_seed(zlib.crc32(f"quantize/{name}".encode()))


def quantize_case(name, shape, dtype, axis, per_channel):
    gen = generator(name)
    x = (torch.rand(shape, generator=gen) * 16 - 8).float()
    # ties: multiples of half a step
    x.view(-1)[::3] = torch.round(x.view(-1)[::3] * 4) / 4
    if per_channel:
        c = shape[axis]
        scale = torch.tensor([2.0 ** -(1 + i % 4) for i in range(c)], dtype=torch.float64)
        lo, hi = (0, 255) if dtype == torch.quint8 else (-128, 127)
        zp = torch.randint(lo, hi + 1, (c,), generator=gen)
        q = torch.quantize_per_channel(x, scale, zp, axis, dtype)
    else:
        scale = torch.tensor([0.125], dtype=torch.float64)
        zp = torch.tensor([128 if dtype == torch.quint8 else -3])
        q = torch.quantize_per_tensor(x, float(scale[0]), int(zp[0]), dtype)
    return {"name": name, "kind": "quantize", "x": encode_tensor(x),
            "scale": [float(v) for v in scale], "zero_point": [int(v) for v in zp],
            "axis": axis, "q": encode_tensor(q.int_repr())}


def quantized_weight(gen, shape, per_channel):
    w = (torch.rand(shape, generator=gen) * 2 - 1).float()
    if per_channel:
        scale = (torch.rand(shape[0], generator=gen, dtype=torch.float64) * 0.01 + 0.002).float().double()
        return torch.quantize_per_channel(w, scale, torch.zeros(shape[0], dtype=torch.long), 0, torch.qint8)
    return torch.quantize_per_tensor(w, 0.0078125, 0, torch.qint8)


def weight_params(wq):
    if wq.qscheme() == torch.per_channel_affine:
        return ([float(v) for v in wq.q_per_channel_scales()],
                [int(v) for v in wq.q_per_channel_zero_points()])
    return [float(wq.q_scale())], [int(wq.q_zero_point())]


def product_case(name, kind, x_shape, w_shape, per_channel, stride=1, padding=0, dilation=1,
                 groups=1):
    gen = generator(name)
    x = (torch.rand(x_shape, generator=gen) * 4 - 1).float()
    xq = torch.quantize_per_tensor(x, 0.03125, 40, torch.quint8)
    wq = quantized_weight(gen, w_shape, per_channel)
    y_scale, y_zp = 0.0625, 100
    if kind == "linear":
        packed = torch.ops.quantized.linear_prepack(wq, None)
        y = torch.ops.quantized.linear(xq, packed, y_scale, y_zp)
    else:
        packed = torch.ops.quantized.conv2d_prepack(wq, None, [stride, stride], [padding, padding],
                                                    [dilation, dilation], groups)
        y = torch.ops.quantized.conv2d(xq, packed, y_scale, y_zp)
    w_scale, w_zp = weight_params(wq)
    case = {"name": name, "kind": kind, "x": encode_tensor(xq.int_repr()),
            "x_scale": xq.q_scale(), "x_zero_point": xq.q_zero_point(),
            "w": encode_tensor(wq.int_repr()), "w_scale": w_scale, "w_zero_point": w_zp,
            "y_scale": y_scale, "y_zero_point": y_zp, "y": encode_tensor(y.int_repr())}
    if kind == "conv":
        case.update(stride=stride, padding=padding, dilation=dilation, groups=groups)
    return case


def write(path):
    torch.backends.quantized.engine = "onednn"
    cases = [
        quantize_case("per_tensor_uint8", (4, 33), torch.quint8, 1, False),
        quantize_case("per_tensor_int8", (3, 5, 7), torch.qint8, 1, False),
        quantize_case("per_channel_uint8_axis1", (2, 6, 5), torch.quint8, 1, True),
        quantize_case("per_channel_int8_axis0", (5, 4), torch.qint8, 0, True),
        quantize_case("per_channel_int8_axis2", (2, 3, 7), torch.qint8, 2, True),
        product_case("linear_per_tensor", "linear", (5, 40), (24, 40), False),
        product_case("linear_per_channel", "linear", (7, 65), (33, 65), True),
        product_case("conv_3x3_pad1", "conv", (2, 3, 8, 7), (8, 3, 3, 3), False, padding=1),
        product_case("conv_per_channel_stride2", "conv", (1, 4, 9, 9), (6, 4, 3, 3), True, stride=2,
                     padding=1),
        product_case("conv_grouped_dilated", "conv", (1, 4, 10, 10), (4, 2, 3, 3), True, padding=2,
                     dilation=2, groups=2),
        product_case("conv_depthwise", "conv", (1, 8, 6, 6), (8, 1, 3, 3), True, padding=1, groups=8),
        product_case("conv_1x1", "conv", (2, 16, 5, 5), (12, 16, 1, 1), True),
    ]
    with open(path, "w") as f:
        json.dump({"cases": cases}, f, separators=(",", ":"))
        f.write("\n")
    return path
