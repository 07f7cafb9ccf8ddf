#!/usr/bin/python3
"""Real architectures as ONNX models with reference outputs from PyTorch, for `smelt check`.

    /usr/bin/python3 tests/models/make_models.py small OUT   the committed ones (tests/models/small)
    /usr/bin/python3 tests/models/make_models.py large OUT   full size (ResNet-18, MobileNetV2,
                                                            SqueezeNet 1.1 at 224x224, a transformer
                                                            encoder); ctest writes them to
                                                            build/models, bench/run.py reads them
    ... [--only NAME]                                        one model
    ... [--keep]                                             only the models not in OUT yet
    ... [--ctest]                                            large: only those ctest checks full size

Each model is a directory in the ONNX backend-test layout: model.onnx and
test_data_set_0/{input_0.pb, output_0.pb} (TensorProto files), the output computed by PyTorch in
eval mode. Weights are random (fixed seeds), and every batch norm gets non-trivial statistics: its
scale and shift are random, and its running mean and variance are those of the network's own
activations on random batches (a network whose statistics are all 0 and 1 would let a wrong
batch-norm import pass unnoticed; statistics of its own activations keep the outputs O(1), so
rtol 1e-3 / atol 1e-4 is a real test).

The small variants keep each architecture's structure (blocks, strides, residuals, depthwise
convs, Fire modules, attention) with fewer channels and a smaller input, so the files stay under
about 2 MB. Needs Debian's python3-torch, python3-torchvision and python3-onnx (only to make
these files; smelt never depends on them).
"""
import argparse
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torchvision
from torchvision.models.resnet import BasicBlock, ResNet
from torchvision.models.convnext import CNBlockConfig, ConvNeXt
from torchvision.models.densenet import DenseNet
from torchvision.models.shufflenetv2 import ShuffleNetV2
from torchvision.models.squeezenet import Fire
from torchvision.models.vision_transformer import VisionTransformer


class NarrowResNet18(ResNet):
    """ResNet-18's structure (BasicBlock, [2, 2, 2, 2]) with stage widths w, 2w, 4w, 8w."""

    def __init__(self, width, num_classes):
        nn.Module.__init__(self)
        self._norm_layer, self.groups, self.base_width, self.dilation = nn.BatchNorm2d, 1, 64, 1
        self.inplanes = width
        self.conv1 = nn.Conv2d(3, width, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(BasicBlock, width, 2)
        self.layer2 = self._make_layer(BasicBlock, 2 * width, 2, stride=2)
        self.layer3 = self._make_layer(BasicBlock, 4 * width, 2, stride=2)
        self.layer4 = self._make_layer(BasicBlock, 8 * width, 2, stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(8 * width, num_classes)


def narrow_squeezenet1_1(scale, num_classes):
    """SqueezeNet 1.1's layers (torchvision's Fire modules, ceil-mode pools) with every width
    multiplied by `scale`."""
    s = lambda c: max(1, int(c * scale))
    features = nn.Sequential(
        nn.Conv2d(3, s(64), kernel_size=3, stride=2), nn.ReLU(inplace=True),
        nn.MaxPool2d(kernel_size=3, stride=2, ceil_mode=True),
        Fire(s(64), s(16), s(64), s(64)), Fire(s(128), s(16), s(64), s(64)),
        nn.MaxPool2d(kernel_size=3, stride=2, ceil_mode=True),
        Fire(s(128), s(32), s(128), s(128)), Fire(s(256), s(32), s(128), s(128)),
        nn.MaxPool2d(kernel_size=3, stride=2, ceil_mode=True),
        Fire(s(256), s(48), s(192), s(192)), Fire(s(384), s(48), s(192), s(192)),
        Fire(s(384), s(64), s(256), s(256)), Fire(s(512), s(64), s(256), s(256)))
    model = torchvision.models.squeezenet1_1(weights=None, num_classes=num_classes)
    model.features = features
    model.classifier[1] = nn.Conv2d(s(512), num_classes, kernel_size=1)
    return model


class Encoder(nn.Module):
    """nn.TransformerEncoder (post-norm layers, ReLU FFN, no dropout) over (batch, seq, d)."""

    def __init__(self, d, heads, ff, layers):
        super().__init__()
        layer = nn.TransformerEncoderLayer(d, heads, dim_feedforward=ff, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)

    def forward(self, x):
        return self.encoder(x)


class UNet(nn.Module):
    """A 3-level UNet: conv-BN-ReLU blocks, max-pool down, a ConvTranspose up and a bilinear
    Upsample (ONNX Resize) up, skip connections concatenated."""

    def __init__(self, c):
        super().__init__()

        def block(i, o):
            return nn.Sequential(nn.Conv2d(i, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU(inplace=True))
        self.d1, self.d2, self.d3 = block(3, c), block(c, 2 * c), block(2 * c, 4 * c)
        self.pool = nn.MaxPool2d(2)
        self.up2 = nn.ConvTranspose2d(4 * c, 2 * c, 2, stride=2)
        self.u2 = block(4 * c, 2 * c)
        self.up1 = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
        self.u1 = block(3 * c, c)
        self.out = nn.Conv2d(c, 2, 1)

    def forward(self, x):
        a = self.d1(x)
        b = self.d2(self.pool(a))
        m = self.d3(self.pool(b))
        y = self.u2(torch.cat([self.up2(m), b], 1))
        y = self.u1(torch.cat([self.up1(y), a], 1))
        return self.out(y)


class LstmTagger(nn.Module):
    """A sequence tagger as users write one: token embedding, a multi-layer bidirectional LSTM
    (batch first), a linear head per token."""

    def __init__(self, vocab, d, hidden, layers, tags):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.lstm = nn.LSTM(d, hidden, num_layers=layers, batch_first=True, bidirectional=True)
        self.head = nn.Linear(2 * hidden, tags)

    def forward(self, tokens):
        out, _ = self.lstm(self.embed(tokens))
        return self.head(out)


class GruClassifier(nn.Module):
    """A sentence classifier: embedding, a 2-layer GRU over (seq, batch), the last layer's final
    hidden state into a linear head."""

    def __init__(self, vocab, d, hidden, classes):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.gru = nn.GRU(d, hidden, num_layers=2)
        self.head = nn.Linear(hidden, classes)

    def forward(self, tokens):
        _, h = self.gru(self.embed(tokens.t()))
        return self.head(torch.tanh(h[-1]))


# Token-input models: (constructor, (batch, seq), opset, {"vocab": V}); exported with the batch
# and sequence dims dynamic (dynamic_axes), as text models are.
# name: (constructor, input shape, opset). Opsets vary on purpose (13-17): each exporter version
# spells some ops differently (Squeeze/ReduceMean axes as inputs from 13 and 18, LayerNormalization
# from 17).
SMALL = {
    "resnet18_w8_64": (lambda: NarrowResNet18(8, 10), (1, 3, 64, 64), 13),
    "mobilenetv2_x0.25_96": (lambda: torchvision.models.mobilenet_v2(weights=None, width_mult=0.25, num_classes=10),
                             (1, 3, 96, 96), 15),
    "squeezenet1_1_x0.5_64": (lambda: narrow_squeezenet1_1(0.5, 10), (1, 3, 64, 64), 14),
    "transformer_encoder_d64_l2_s16": (lambda: Encoder(64, 4, 128, 2), (1, 16, 64), 17),
    "lstm_tagger_h16_s12": (lambda: LstmTagger(50, 12, 16, 2, 5), (2, 12), 13, {"vocab": 50}),
    "gru_classifier_h16_s10": (lambda: GruClassifier(40, 8, 16, 3), (3, 10), 17, {"vocab": 40}),
    # squeeze-excitation, hard-swish; permuted (channels-last) LayerNorm in primitives; dense
    # connectivity; channel shuffle and grouped/depthwise convs; ConvTranspose and Resize; a
    # vision transformer (patch conv, class token, attention)
    "mobilenetv3_small_x0.5_96": (lambda: torchvision.models.mobilenet_v3_small(weights=None, width_mult=0.5,
                                                                                num_classes=10), (1, 3, 96, 96), 13),
    "convnext_d16_64": (lambda: ConvNeXt([CNBlockConfig(16, 32, 2), CNBlockConfig(32, 64, 2), CNBlockConfig(64, None, 2)],
                                         num_classes=10), (1, 3, 64, 64), 13),
    "densenet_g8_64": (lambda: DenseNet(growth_rate=8, block_config=(2, 2, 2, 2), num_init_features=16, num_classes=10),
                       (1, 3, 64, 64), 14),
    "shufflenetv2_x0.25_64": (lambda: ShuffleNetV2([2, 2, 2], [12, 24, 48, 96, 256], num_classes=10), (1, 3, 64, 64), 13),
    "unet_c8_64": (lambda: UNet(8), (1, 3, 64, 64), 13),
    "vit_p8_d32_32": (lambda: VisionTransformer(32, 8, 2, 2, 32, 64, num_classes=10), (1, 3, 32, 32), 17),
}
LARGE = {
    "resnet18": (lambda: torchvision.models.resnet18(weights=None), (1, 3, 224, 224), 13),
    "mobilenetv2": (lambda: torchvision.models.mobilenet_v2(weights=None), (1, 3, 224, 224), 15),
    "squeezenet1_1": (lambda: torchvision.models.squeezenet1_1(weights=None), (1, 3, 224, 224), 14),
    "transformer_encoder_d256_l4_s128": (lambda: Encoder(256, 4, 1024, 4), (1, 128, 256), 17),
    "lstm_tagger_h256_s64": (lambda: LstmTagger(5000, 128, 256, 2, 17), (1, 64), 13, {"vocab": 5000}),
    "mobilenetv3_small": (lambda: torchvision.models.mobilenet_v3_small(weights=None), (1, 3, 224, 224), 13),
    "efficientnet_b0": (lambda: torchvision.models.efficientnet_b0(weights=None), (1, 3, 224, 224), 13),
    # the rest of the zoo at the sizes people deploy: permuted LayerNorm in primitives (opset 13),
    # dense connectivity, channel shuffle, a UNet at 256x256, a DeiT-tiny-sized ViT, a GRU classifier
    "convnext_tiny": (lambda: torchvision.models.convnext_tiny(weights=None), (1, 3, 224, 224), 13),
    "densenet121": (lambda: torchvision.models.densenet121(weights=None), (1, 3, 224, 224), 14),
    "shufflenet_v2_x1_0": (lambda: torchvision.models.shufflenet_v2_x1_0(weights=None), (1, 3, 224, 224), 13),
    "unet_c16_256": (lambda: UNet(16), (1, 3, 256, 256), 13),
    "vit_tiny_p16_224": (lambda: VisionTransformer(224, 16, 12, 3, 192, 768), (1, 3, 224, 224), 17),
    "gru_classifier_h256_s64": (lambda: GruClassifier(5000, 128, 256, 4), (1, 64), 17, {"vocab": 5000}),
}

# What ctest makes and checks full size (tests/models/check_large.sh: `--ctest`); the rest of LARGE
# is checked in ctest through its small variant and timed full size by `make bench`.
CTEST_LARGE = ("resnet18", "mobilenetv2", "squeezenet1_1", "transformer_encoder_d256_l4_s128", "lstm_tagger_h256_s64",
               "mobilenetv3_small", "efficientnet_b0")


def calibrate_batch_norms(model, shape, generator):
    """Random batch-norm scales and shifts; running statistics from the model's own activations."""
    norms = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not norms:
        return
    with torch.no_grad():
        for m in norms:
            m.weight.copy_(torch.rand(m.weight.shape, generator=generator) + 0.5)
            m.bias.copy_(torch.randn(m.bias.shape, generator=generator) * 0.2)
            m.reset_running_stats()
            m.momentum = None  # a cumulative average over the calibration batches
        model.train()
        batch = (4,) + tuple(shape[1:])
        for _ in range(3):
            model(torch.randn(batch, generator=generator))
    for m in norms:
        assert not torch.allclose(m.running_var, torch.ones_like(m.running_var)), "statistics stayed trivial"


def save_tensor(path, array, name):
    import onnx.numpy_helper  # only to write the files: bench/torch_bench.py imports LARGE without it
    proto = onnx.numpy_helper.from_array(np.ascontiguousarray(array), name)
    with open(path, "wb") as f:
        f.write(proto.SerializeToString())


def make(name, spec, out_dir, seed):
    import onnx
    build, shape, opset = spec[:3]
    tokens = spec[3] if len(spec) > 3 else None
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    model = build()
    # Parameters initialized to (nearly) zero — a ViT's classifier, ConvNeXt's layer scales of
    # 1e-6 — would make their part of the network invisible in the outputs: random instead.
    with torch.no_grad():
        for p in model.parameters():
            if p.numel() > 1 and p.abs().max() < 1e-3:
                p.copy_(torch.randn(p.shape, generator=generator) * 0.2)
    if not tokens:
        calibrate_batch_norms(model, shape, generator)
    model.eval()
    if tokens:
        x = torch.randint(0, tokens["vocab"], shape, generator=generator)
    else:
        x = torch.randn(shape, generator=generator)
    with torch.no_grad():
        y = model(x)
    case = os.path.join(out_dir, name)
    data = os.path.join(case, "test_data_set_0")
    os.makedirs(data, exist_ok=True)
    path = os.path.join(case, "model.onnx")
    # PRESERVE (the model is in eval mode): the exporter's eval-mode peephole would fold every
    # batch norm into its conv; exported as BatchNormalization nodes, they test smelt's import and
    # its own folding (passes/fold_batchnorm), as models from other exporters do.
    dynamic = {"input": {0: "batch", 1: "sequence"}} if tokens else None
    torch.onnx.export(model, (x,), path, opset_version=opset, input_names=["input"], output_names=["output"],
                      do_constant_folding=True, training=torch.onnx.TrainingMode.PRESERVE,
                      dynamic_axes=dynamic)
    onnx.checker.check_model(onnx.load(path))
    save_tensor(os.path.join(data, "input_0.pb"), x.numpy(), "input")
    save_tensor(os.path.join(data, "output_0.pb"), y.numpy(), "output")
    size = os.path.getsize(path)
    print(f"{name}: opset {opset}, input {list(shape)}, output {list(y.shape)}, "
          f"|output| max {y.abs().max().item():.3g}, model.onnx {size / 2**20:.2f} MiB", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("which", choices=["small", "large"])
    parser.add_argument("out")
    parser.add_argument("--only", default="", help="only the model of this name")
    parser.add_argument("--keep", action="store_true", help="skip models whose files are already in OUT")
    parser.add_argument("--ctest", action="store_true", help="large: only the models ctest checks full size")
    args = parser.parse_args()
    table = SMALL if args.which == "small" else LARGE
    names = [n for n in table if (not args.only or n == args.only) and (not args.ctest or n in CTEST_LARGE)]
    if not names:
        sys.exit(f"make_models.py: no {args.which} model '{args.only}' (have: {', '.join(table)})")
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    for i, name in enumerate(table):
        if name not in names:
            continue
        done = os.path.join(args.out, name, "test_data_set_0", "output_0.pb")
        if args.keep and os.path.exists(done):
            continue
        make(name, table[name], args.out, seed=1000 + i)


if __name__ == "__main__":
    main()
