#!/usr/bin/env bash
# Fresh Debian 12 machine -> built strata -> a generation with the vendored tiny Llama.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages strata builds against (see "Dependencies" in README.md for why each).
PACKAGES=(cmake ninja-build g++ pkg-config nlohmann-json3-dev libcli11-dev libfmt-dev
          libopenblas-dev libpcre2-dev libutf8proc-dev libgtest-dev libgmock-dev libopenmpi-dev
          openmpi-bin libcpp-httplib-dev)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js runs the official OpenAI client against `strata serve` in the tests; a node that is
# already installed (from anywhere) is kept.
command -v node >/dev/null && command -v npm >/dev/null || missing+=(nodejs npm)
if ((${#missing[@]})); then
  SUDO=$([ "$(id -u)" = 0 ] && echo "" || echo sudo)
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${missing[@]}"
fi

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build
# The test suite's npm packages (tests/node/package-lock.json pins them; node_modules is not
# committed).
npm ci --prefix tests/node --no-audit --no-fund

# The main job: greedy generation with a tiny random-weight Llama (tests/data/models/llama).
./build/strata generate --model tests/data/models/llama --input-ids 1,15,42,7 --max-new-tokens 12 --json
