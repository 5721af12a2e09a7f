#!/usr/bin/env bash
# The model fixtures (tests/data/models/<case>/: the tiny Hugging Face models with their
# transformers references, and the trained tiny-en; tests/data/README.md) are vendored as one
# archive, tests/data/models.tar.xz: f32 and bf16 safetensors are most of the tracked tree
# otherwise, and a device run carries the tree. tests/CMakeLists.txt unpacks it into
# build/tests/models at configure time (again whenever its hash changes); the tests find it
# there (STRATA_MODEL_DATA), and so do scripts/setup.sh and the GPU run scripts.
#   scripts/pack_fixtures.sh unpack   # tests/data/models.tar.xz -> tests/data/models/
#   scripts/pack_fixtures.sh pack     # tests/data/models/ -> tests/data/models.tar.xz
# To re-vendor: unpack; regenerate or copy cases into tests/data/models/ (make_fixtures.py
# OUTDIR in ../shared/tools writes one directory per case, tools/routing_margins.py writes
# beside a case, tools/train_tiny/train.py writes tiny-en); pack; commit the archive; then
# delete the folder (git ignores it; the build never reads it). The same files pack to the
# same bytes (names sorted, times, owners and modes fixed, xz on one thread), so repacking
# unchanged fixtures leaves the archive unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."
archive=tests/data/models.tar.xz
dir=tests/data/models
case "${1:-}" in
  unpack)
    if [ -e "$dir" ]; then
      echo "error: $dir exists; pack it or delete it first" >&2
      exit 1
    fi
    mkdir -p "$dir"
    tar -C "$dir" -xJf "$archive"
    echo "unpacked $archive into $dir"
    ;;
  pack)
    [ -d "$dir" ] || { echo "error: no $dir to pack (scripts/pack_fixtures.sh unpack)" >&2; exit 1; }
    export LC_ALL=C
    # One top-level entry per case, as in tokenizers.tar.xz (the glob sorts in byte order).
    (cd "$dir" && tar --format=gnu --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner \
      --mode='u+rwX,go+rX,go-w' -cf - -- *) | xz -9e -T1 >"$archive.tmp"
    mv "$archive.tmp" "$archive"
    echo "$(du -b "$archive" | cut -f1) bytes  sha256 $(sha256sum "$archive" | cut -c1-64)  $archive"
    ;;
  *)
    echo "usage: $0 pack|unpack" >&2
    exit 2
    ;;
esac
