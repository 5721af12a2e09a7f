#!/usr/bin/env bash
# Builds the fuzz targets (fuzz/build.sh) and runs each for a bounded time from the seed corpus
# in fuzz/corpus/<target>/ (new inputs go to a scratch copy, not into the repository). A crash,
# a sanitizer report, a leak or a hang (-timeout) fails the run; the input is left in
# build-fuzz/<target>.crash-* to add as a regression seed. One line per target:
# executions, coverage (libFuzzer's cov: edges) and features.
#   fuzz/run.sh            # 20 s per target (what CI runs)
#   fuzz/run.sh 600        # 10 minutes per target
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET=${1:-${FUZZ_SECONDS:-20}}
./fuzz/build.sh >/dev/null
export STRATA_FUZZ_TOKENIZER=$PWD/tests/data/tokenizers/tiny_chatml/tokenizer.json
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
failed=0
for bin in build-fuzz/*_fuzz; do
  name=$(basename "$bin")
  work=$(mktemp -d)
  cp -r "fuzz/corpus/$name/." "$work/"
  log=build-fuzz/$name.log
  if ! "$bin" -max_total_time="$SECONDS_PER_TARGET" -timeout=10 -rss_limit_mb=2048 \
      -max_len=65536 -print_final_stats=1 -artifact_prefix="build-fuzz/$name." "$work" \
      >"$log" 2>&1; then
    echo "FAILED: $name (see $log)"
    tail -30 "$log"
    failed=1
  fi
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo 0)
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo 0)
  echo "fuzz $name: ${SECONDS_PER_TARGET} s, $execs executions, cov $cov, ft $ft"
  rm -rf "$work"
done
exit $failed
