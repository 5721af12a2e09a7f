#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/*_fuzz.cpp) with Debian's clang and AddressSanitizer +
# UndefinedBehaviorSanitizer into build-fuzz/: only the parsing code they reach is compiled
# (one archive, each target links what it uses), so this stays small next to the main builds.
# No debug info (it slows the compile of these template-heavy files): reports name functions;
# FUZZ_DEBUG=1 adds -g to reproduce a saved crash input with file:line.
set -euo pipefail
cd "$(dirname "$0")/.."
CXX=${FUZZ_CXX:-clang++}
OUT=build-fuzz
mkdir -p "$OUT/obj"
SAN=(-fsanitize=address,undefined -fno-sanitize-recover=undefined)
FLAGS=(-std=c++20 -O1 ${FUZZ_DEBUG:+-g} -Isrc "${SAN[@]}" $(pkg-config --cflags fmt libpcre2-8 libutf8proc))
LIBS=($(pkg-config --libs fmt libpcre2-8 libutf8proc))
SOURCES=(
  core/dtype.cpp core/log.cpp
  model/json_util.cpp model/config.cpp model/config_checks.cpp model/layer_kinds.cpp
  model/layer_spec.cpp model/safetensors_header.cpp
  tokenizer/unicode.cpp tokenizer/regex.cpp tokenizer/normalizer.cpp tokenizer/pre_tokenizer.cpp
  tokenizer/bpe_model.cpp tokenizer/added_vocabulary.cpp tokenizer/decoder.cpp
  tokenizer/tokenizer.cpp tokenizer/decode_stream.cpp tokenizer/jinja_value.cpp
  tokenizer/jinja_lexer.cpp tokenizer/jinja_parser.cpp tokenizer/jinja_eval.cpp
  tokenizer/jinja_builtins.cpp tokenizer/jinja_methods.cpp tokenizer/chat_template.cpp
  server/request_fields.cpp server/request_parsing.cpp runtime/sampler.cpp ops/sampling.cpp
  ops/logit_edits.cpp ops/logprobs.cpp
)
compile() {  # source -> object, rebuilt when the source is newer
  local src=$1 obj=$OUT/obj/$(echo "$1" | tr / _).o
  if [ ! -f "$obj" ] || [ "src/$src" -nt "$obj" ]; then
    "$CXX" "${FLAGS[@]}" -DSTRATA_HAVE_UTF8PROC=1 -c "src/$src" -o "$obj"
  fi
}
export -f compile
export CXX OUT
export FLAGS_STR="${FLAGS[*]}"
for s in "${SOURCES[@]}"; do echo "$s"; done |
  xargs -P "${FUZZ_JOBS:-2}" -I{} bash -c 'FLAGS=($FLAGS_STR); compile {}'
rm -f "$OUT/libparsers.a"
ar rcs "$OUT/libparsers.a" "$OUT"/obj/*.o
for target in fuzz/*_fuzz.cpp; do
  name=$(basename "$target" .cpp)
  "$CXX" "${FLAGS[@]}" -fsanitize=fuzzer "$target" "$OUT/libparsers.a" "${LIBS[@]}" -o "$OUT/$name"
done
echo "fuzz targets in $OUT/"
