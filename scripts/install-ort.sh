#!/usr/bin/env bash
# Installs ONNX Runtime's CPU runtime (npm onnxruntime-node, the version pinned in
# bench/ort/package-lock.json) into bench/ort/node_modules, for the ONNX Runtime peer of bench/ and
# the test that runs smelt's ONNX exports in it (onnx_export_ort). --ignore-scripts: the package's
# install script fetches optional GPU files that are not needed. Best effort: without npm, or
# without the registry, it says so and exits 0 — those tests are then skipped, never failed.
set -uo pipefail
cd "$(dirname "$0")/../bench/ort"
[ -d node_modules/onnxruntime-node ] && exit 0
if ! command -v npm >/dev/null; then
  echo "install-ort: npm is not installed; ONNX Runtime tests and bench rows will be skipped"
  exit 0
fi
if ! timeout 600 npm ci --ignore-scripts --no-audit --no-fund --loglevel=error; then
  echo "install-ort: npm could not install onnxruntime-node; ONNX Runtime tests will be skipped"
  rm -rf node_modules
fi
exit 0
