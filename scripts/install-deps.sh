#!/usr/bin/env bash
# Installs the Debian packages smelt needs, and only those that are missing.
# Idempotent and quiet when nothing is missing.
#   scripts/install-deps.sh          build + test dependencies
#   scripts/install-deps.sh bench    also PyTorch and node (ONNX Runtime), to benchmark against
#   scripts/install-deps.sh golden   also PyTorch, to regenerate tests/golden and tests/models
#   scripts/install-deps.sh fuzz     also clang, libFuzzer and clang's OpenMP (make fuzz-smoke)
#   scripts/install-deps.sh onnx     also python3-onnx (onnx.checker over exported models) and node
#                                    (ONNX Runtime's npm package runs exported models; tests/onnx/export)
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libopenblas-dev          # library GEMM candidate
  libdnnl-dev              # oneDNN: library convolution candidate (kernels/conv_onednn.h)
  ocl-icd-opencl-dev       # oneDNN's CMake config looks for OpenCL (a Recommends of libdnnl-dev)
  nlohmann-json3-dev       # safetensors headers, reports
  libgtest-dev libgmock-dev googletest
  libbenchmark-dev
  libcli11-dev             # the command line of build/smelt
  zlib1g-dev               # reading data/digits.csv.gz
  pybind11-dev python3-dev # the Python module (python/)
  python3-numpy python3-pytest  # its NumPy interop and its tests
  libonnx-dev libprotobuf-dev  # ONNX import: the ONNX protobuf schema and its runtime
  libopenmpi-dev openmpi-bin  # data-parallel training (src/distributed) and its tests (mpirun)
  gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user  # the C export's tests: cross-compiled, run under qemu
)
case "${1:-}" in
  # torchvision + onnx: tests/models/make_models.py (the real models); nodejs + npm: ONNX Runtime
  # as a bench peer (bench/ort_bench.js, onnxruntime-node from npm).
  # (npm only when no npm is on PATH: a nodejs from elsewhere brings its own)
  bench) packages+=(python3-torch python3-numpy python3-torchvision python3-onnx nodejs)
         command -v npm >/dev/null || packages+=(npm) ;;
  golden) packages+=(python3-torch python3-numpy python3-torchvision python3-onnx) ;;
  # clang-rt: the libFuzzer and sanitizer runtimes; libomp: OpenMP for clang (gcc has libgomp).
  fuzz) packages+=(clang libclang-rt-dev libomp-dev) ;;
  onnx) packages+=(python3-onnx nodejs)
        command -v npm >/dev/null || packages+=(npm) ;;
  "") ;;
  *) echo "usage: $0 [bench|golden|fuzz|onnx]" >&2; exit 2 ;;
esac

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
