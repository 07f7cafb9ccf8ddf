#!/usr/bin/env python3
"""The standalone C export against smelt's compiled plan, one thread each (docs/export_c.md).

    /usr/bin/python3 bench/export_c.py [--build-dir build] [--models build/models] [--reps 20] [--only NAME]

For each full-size model (the ONNX files of tests/models/make_models.py large; run `make bench`
or the ctest models_large_make once to make them): `smelt export-c --weights file` for this
machine's target, the export compiled with `cc -std=c11 -O3 -march=native -fopenmp-simd
-DSMELT_OPENMP_SIMD` (no threads: the simd pragmas of the fused kernels only) and a timing driver
(the weights read into a static buffer, the input fixed), its best and median time over --reps
runs after one warm-up; `smelt bench` of the same model with OMP_NUM_THREADS=1 (the plan, its
kernels compiled); the ratio; and, cross-compiled for aarch64 (`aarch64-linux-gnu-gcc -O3`), the
model's object size (code, and static data + bss: the arena; the weights are in the file) and
a static binary's size (with this driver and libc), with the arena each model needs. Alternate rounds: export, plan, export, plan.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODELS = ["resnet18", "mobilenetv2", "squeezenet1_1", "mobilenetv3_small", "efficientnet_b0",
          "transformer_encoder_d256_l4_s128", "lstm_tagger_h256_s64"]
DIMS = ["--dim", "batch=1", "--dim", "sequence=128", "--dim", "seq=64"]

DRIVER = r"""
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "model.h"
static _Alignas(64) unsigned char weights[MODEL_WEIGHTS_BYTES + 1];
%(buffers)s
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e3 + t.tv_nsec / 1e6; }
static int cmp(const void* a, const void* b) { double x = *(const double*)a, y = *(const double*)b; return (x > y) - (x < y); }
int main(int argc, char** argv) {
  FILE* f = fopen("model.weights", "rb");
  if (!f || fread(weights, 1, MODEL_WEIGHTS_BYTES, f) != MODEL_WEIGHTS_BYTES) return 3;
  fclose(f);
%(fill)s
  int reps = argc > 1 ? atoi(argv[1]) : 10;
  static double t[10000];
  if (model_run(%(args)s) != 0) return 4;
  for (int r = 0; r < reps; ++r) { double t0 = now(); model_run(%(args)s); t[r] = now() - t0; }
  qsort(t, (size_t)reps, sizeof t[0], cmp);
  printf("%%.3f %%.3f\n", t[0], t[reps / 2]);
  return 0;
}
"""


def driver(header):
    """The timing driver for the model.h text `header`: buffers for each input and output."""
    inputs = re.findall(r"#define MODEL_INPUT(\d+)_NUMEL (\d+)\s+/\* (\w+)", header)
    outputs = re.findall(r"#define MODEL_OUTPUT(\d+)_NUMEL (\d+)\s+/\* (\w+)", header)
    ctype = {"float32": "float", "float64": "double", "int64": "int64_t", "int32": "int32_t", "bool": "bool",
             "uint8": "uint8_t"}
    buffers, fill, args = [], [], ["weights"]
    for i, n, dtype in inputs:
        buffers.append(f"static {ctype[dtype]} in{i}[{int(n) + 1}];")
        value = "(float)((k * 7919) % 1000) / 500.0f - 1.0f" if dtype.startswith("float") else "(k % 2)"
        fill.append(f"  for (long k = 0; k < {n}; ++k) in{i}[k] = {value};")
        args.append(f"in{i}")
    for i, n, dtype in outputs:
        buffers.append(f"static {ctype[dtype]} out{i}[{int(n) + 1}];")
        args.append(f"out{i}")
    return DRIVER % {"buffers": "\n".join(buffers), "fill": "\n".join(fill), "args": ", ".join(args)}


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout


def target():
    flags = open("/proc/cpuinfo").read()
    return "x86-64-v4" if " avx512f" in flags else "x86-64-v3" if " avx2" in flags else "generic"


def plan_ms(smelt, model, reps):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    out = run([smelt, "bench", str(model), "--reps", str(reps), "--no-interpreter", "--backend", "cpp"] + DIMS, env=env)
    m = re.search(r"compiled plan: median ([\d.]+) ms, p90 [\d.]+ ms, min ([\d.]+) ms", out)
    return float(m.group(2)), float(m.group(1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", default="build")
    parser.add_argument("--models", default="")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--only", action="append", default=[], help="this model only (repeatable)")
    args = parser.parse_args()
    build = Path(args.build_dir).resolve()
    smelt = str(build / "smelt")
    models = Path(args.models) if args.models else build / "models"
    cross = subprocess.run(["sh", "-c", "command -v aarch64-linux-gnu-gcc"], capture_output=True).returncode == 0
    rows = []
    for name in args.only or MODELS:
        model = models / name / "model.onnx"
        if not model.exists():
            print(f"{name}: {model} missing (make it with the ctest models_large_make)", file=sys.stderr)
            continue
        with tempfile.TemporaryDirectory() as tmp:
            out = run([smelt, "export-c", str(model), "-o", tmp, "--weights", "file", "--target", target()] + DIMS)
            arena = int(re.search(r"arena (\d+) bytes", out).group(1))
            header = Path(tmp, "model.h").read_text()
            Path(tmp, "bench.c").write_text(driver(header))
            run(["cc", "-std=c11", "-O3", "-march=native", "-fopenmp-simd", "-DSMELT_OPENMP_SIMD", "-o", "bench", "bench.c",
                 "model.c", "-lm"], cwd=tmp)
            export, plan = [], []
            for _ in range(args.rounds):
                export.append([float(v) for v in run(["./bench", str(args.reps)], cwd=tmp).split()])
                plan.append(plan_ms(smelt, model, args.reps))
            text = size = "-"
            if cross:
                subprocess.run([smelt, "export-c", str(model), "-o", tmp, "--weights", "file", "--target", "aarch64"] + DIMS,
                               check=True, capture_output=True)
                run(["aarch64-linux-gnu-gcc", "-std=c11", "-O3", "-c", "model.c", "-o", "model_a64.o"], cwd=tmp)
                sizes = run(["aarch64-linux-gnu-size", "model_a64.o"], cwd=tmp).splitlines()[1].split()
                text = f"{int(sizes[0])} / {int(sizes[1]) + int(sizes[2])}"
                run(["aarch64-linux-gnu-gcc", "-std=c11", "-O3", "-static", "-o", "bench_a64", "bench.c", "model.c",
                     "-lm"], cwd=tmp)
                size = os.path.getsize(Path(tmp, "bench_a64"))
        best_export = min(e[0] for e in export)
        best_plan = min(p[0] for p in plan)
        median_export = statistics.median(e[1] for e in export)
        median_plan = statistics.median(p[1] for p in plan)
        rows.append((name, best_export, median_export, best_plan, median_plan, best_export / best_plan, arena, text, size))
        print(f"{name}: export {best_export:.2f} ms (median {median_export:.2f}), plan {best_plan:.2f} ms "
              f"(median {median_plan:.2f}), ratio {best_export / best_plan:.2f}", file=sys.stderr)
    print(f"| model | export-c, 1 thread (best / median ms) | smelt plan, 1 thread (best / median ms) | ratio (best) "
          f"| arena | aarch64 model.o code / data+bss (B) | aarch64 static binary (B) |")
    print("|---|---|---|---|---|---|---|")
    for name, be, me, bp, mp, ratio, arena, text, size in rows:
        print(f"| {name} | {be:.2f} / {me:.2f} | {bp:.2f} / {mp:.2f} | {ratio:.2f}x | {arena / 2**20:.2f} MiB "
              f"| {text} | {size} |")


if __name__ == "__main__":
    main()
