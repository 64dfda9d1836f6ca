#!/usr/bin/env bash
# Copies the Debian libraries the build links dynamically (Lua for the shared
# library, cJSON for the tool, cmocka for the tests) into build/devlibs, so the
# build folder can run on a GPU machine that lacks them.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p build/devlibs
for lib in liblua5.4.so.0 libcjson.so.1 libcmocka.so.0; do
  cp -L "/usr/lib/x86_64-linux-gnu/$lib" build/devlibs/
done
du -sh build
