#!/usr/bin/env bash
# Compiles every folder of src/ and tests/ as one translation unit (g++ -fsyntax-only): the check
# that no two files of a folder define the same private name, whatever unity groups a later file
# makes (cmake/unity.cmake). Needs a configured build/ (generated headers). About two minutes.
#   scripts/check-unity-names.sh [folder ...]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${BUILD:-$root/build}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
folders=("$@")
if [ ${#folders[@]} -eq 0 ]; then
  for d in "$root"/src/*/ "$root"/tests/*/ "$root"/python/src/; do
    case "$d" in */src/distributed/|*/tests/support/|*/tests/golden/|*/tests/consumer/|*/tests/distributed/) continue ;; esac
    ls "$d"*.cpp >/dev/null 2>&1 && folders+=("${d#$root/}")
  done
fi
flags=(-std=c++20 -fsyntax-only -march=native -fopenmp -DONNX_ML=1 -DONNX_NAMESPACE=onnx
       -I"$root/include" -I"$root/src" -I"$root/tests" -I"$root/python/src" -I"$build/generated"
       -isystem "$(/usr/bin/python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
       -isystem /usr/include/x86_64-linux-gnu/openblas-pthread
       -DSMELT_TEST_DIR='"x"' -DSMELT_DATA_DIR='"x"' -DSMELT_VERSION='"0"' -DSMELT_CLI_PATH='"x"')
failed=0
for folder in "${folders[@]}"; do
  folder="${folder%/}"
  unit="$work/$(echo "$folder" | tr / _).cpp"
  for f in "$root/$folder"/*.cpp; do echo "#include \"$f\""; done > "$unit"
  if g++ "${flags[@]}" "$unit" > "$unit.log" 2>&1; then
    echo "ok      $folder"
  else
    echo "FAILED  $folder"
    grep -m 5 "error:" "$unit.log" || true
    failed=1
  fi
done
exit $failed
