#!/usr/bin/env bash
# Builds and installs the package (pyproject.toml at the repository root) into a fresh virtual environment, as a
# user's `pip install .` does, and prints how long it took:
#   python/tests/install_in_venv.sh SOURCE_DIR VENV BUILD_DIR
# The venv sees the system's packages (--system-site-packages) for scikit-build-core, which ./dev.sh installs, so
# pip builds without fetching anything (--no-build-isolation); it gets no pip of its own (the system's pip installs
# into it with --python: 4 s less). BUILD_DIR is scikit-build-core's CMake build folder, kept between runs so a
# second install compiles only what changed. Exit 77 (skipped) without scikit-build-core.
set -euo pipefail
src=$1 venv=$2 build_dir=$3
python3 -c "import scikit_build_core" 2>/dev/null || { echo "scikit-build-core is not installed: skipped"; exit 77; }
start=$(date +%s%N)
rm -rf "$venv"
python3 -m venv --system-site-packages --without-pip "$venv"
python3 -m pip --python "$venv/bin/python" install --quiet --no-build-isolation --no-deps --no-index \
  -C build-dir="$build_dir" "$src"
end=$(date +%s%N)
"$venv/bin/python" -c "import attnbwd, sys; print('installed', attnbwd.__version__, 'at', attnbwd.__file__)"
echo "fresh venv and pip install . in $(( (end - start) / 1000000 )) ms"
