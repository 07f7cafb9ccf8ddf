#!/usr/bin/env bash
# ctest's full-size model tests (tests/CMakeLists.txt):
#
#   check_large.sh make  DIR              makes the full-size models missing in DIR
#                                         (make_models.py large --keep --ctest: the zoo's
#                                         other members are checked small), then DIR/complete
#   check_large.sh check DIR SMELT ARGS   runs SMELT check ARGS DIR
#
# Either exits 77 (ctest: skipped) with a message when the models are not there and cannot be
# made (no PyTorch): CI without python3-torch still passes, and says what it did not test.
set -u
what=$1
dir=$2
here=$(cd "$(dirname "$0")" && pwd)
if [ "$what" = make ]; then
  if ! /usr/bin/python3 -c "import torch, torchvision, onnx" 2>/dev/null; then
    [ -f "$dir/complete" ] && { echo "the full-size models are in $dir (no PyTorch to add missing ones)"; exit 0; }
    echo "SKIP: the full-size models (ResNet-18, MobileNetV2, SqueezeNet 1.1, a transformer encoder) are not"
    echo "in $dir and cannot be made here: tests/models/make_models.py needs python3-torch, python3-torchvision"
    echo "and python3-onnx (scripts/install-deps.sh bench)"
    exit 77
  fi
  /usr/bin/python3 "$here/make_models.py" large "$dir" --keep --ctest || exit 1
  touch "$dir/complete"
  exit 0
fi
smelt=$3
shift 3
if [ ! -f "$dir/complete" ]; then
  echo "SKIP: no full-size models in $dir (the test models_large_make makes them when PyTorch is installed)"
  exit 77
fi
exec "$smelt" check "$@" "$dir"
