#!/usr/bin/env bash
# Runs the libFuzzer targets built in build-fuzz/ (see fuzz_targets/README.md).
#   fuzz_targets/run.sh smoke            every target, a few thousand inputs each (CI)
#   fuzz_targets/run.sh long SECONDS [NAME...]
#                                        the named targets (default: all) for SECONDS each
# New inputs go to build-fuzz/corpus/<name>/; the committed seeds in fuzz_targets/corpus/<name>/
# are only read. A crash leaves its input in build-fuzz/artifacts/ and fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${FUZZ_BUILD:-build-fuzz}"
mode="${1:-smoke}"
shift || true
case "$mode" in
  smoke) runs=3000; seconds=120; names=("$@") ;;
  long) runs=-1; seconds="${1:?usage: $0 long SECONDS [NAME...]}"; shift; names=("$@") ;;
  *) echo "usage: $0 smoke | long SECONDS [NAME...]" >&2; exit 2 ;;
esac
if [ ${#names[@]} -eq 0 ]; then
  for source in fuzz_targets/*_fuzz.cpp; do
    n="$(basename "$source" .cpp)"
    names+=("${n%_fuzz}")
  done
fi

mkdir -p "$BUILD/artifacts"
for name in "${names[@]}"; do
  binary="$BUILD/fuzz_targets/${name}_fuzz"
  [ -x "$binary" ] || { echo "fuzz: $binary is not built (make fuzz-build)" >&2; exit 1; }
  work="$BUILD/corpus/$name"
  mkdir -p "$work"
  seeds=()
  [ -d "fuzz_targets/corpus/$name" ] && seeds=("fuzz_targets/corpus/$name")
  echo "fuzz: $name ($mode)"
  # -rss_limit_mb: the loader may allocate as much as the input declares, bounded by the input.
  "$binary" -runs="$runs" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=4096 \
    -print_final_stats=1 -artifact_prefix="$BUILD/artifacts/$name-" \
    "$work" "${seeds[@]}" 2>"$BUILD/artifacts/$name.log" || {
    tail -n 60 "$BUILD/artifacts/$name.log" >&2
    echo "fuzz: $name FAILED (input in $BUILD/artifacts/, log $BUILD/artifacts/$name.log)" >&2
    exit 1
  }
  grep -E "^stat::number_of_executed_units|^stat::new_units_added" "$BUILD/artifacts/$name.log" |
    sed "s/^/fuzz: $name /"
done
