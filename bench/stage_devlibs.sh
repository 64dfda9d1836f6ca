#!/usr/bin/env bash
# Copies the Debian libraries the build links dynamically (cJSON for the tool,
# cmocka for the tests; both attnbwd libraries carry Lua inside) into
# build/devlibs, so the build folder can run on a GPU machine that lacks them.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p build/devlibs
for lib in libcjson.so.1 libcmocka.so.0; do
  cp -L "/usr/lib/x86_64-linux-gnu/$lib" build/devlibs/
done
du -sh build
