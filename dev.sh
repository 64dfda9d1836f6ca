#!/usr/bin/env bash
# attnbwd's one entry point for newcomers and CI.
#   ./dev.sh          install what is missing, build, prewarm the kernel cache for
#                     the public suites (problems 1 and 2) and report; on a GPU also
#                     check and time them
#   ./dev.sh test     install, build, run the tests (CPU; GPU tests skip without
#                     a GPU), then the same under ASan+UBSan
#   ./dev.sh test quick
#                     build, run the fast tests only (no label "slow"): a
#                     minute's loop while editing
#   ./dev.sh gpu-test run the GPU tests (on a machine with a GPU, after ./dev.sh)
set -euo pipefail
cd "$(dirname "$0")"
JOBS=$(nproc 2>/dev/null || echo 2)
PACKAGES="cmake gcc g++ make python3 pkgconf liblua5.4-dev libxxhash-dev libcjson-dev libcmocka-dev libluajit-5.1-dev"

install_packages() {
  local missing=""
  for p in $PACKAGES; do
    dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
  done
  if [ -n "$missing" ]; then
    echo "== installing:$missing"
    local sudo=""
    [ "$(id -u)" = 0 ] || sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $missing >/dev/null
  fi
  # The Python package's build backend: test_python_package builds the package with it, fetching nothing then.
  python3 -c "import scikit_build_core" 2>/dev/null || python3 -m pip install --quiet "scikit-build-core>=0.10"
  if [ ! -x /usr/local/cuda/bin/nvcc ] && ! ls /usr/local/cuda/lib64/libnvrtc.so* >/dev/null 2>&1; then
    echo "CUDA Toolkit 13 not found at /usr/local/cuda: install it first (NVRTC and cuda.h are needed)" >&2
    exit 1
  fi
}

build() { # build DIR [cmake args...]
  local dir=$1; shift
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
  cmake --build "$dir" -j "$JOBS"
}

have_gpu() { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; }

case "${1:-main}" in
  main)
    install_packages
    build build
    if have_gpu; then
      build/attnbwd prewarm sol066_workload sol072_workload
      build/attnbwd check --time sol066_workload sol072_workload
    else
      echo "== no GPU here: prewarming for the H100 and the H200 (sm_90, each with its tuning table)"
      build/attnbwd prewarm --gpu h100,h200 sol066_workload sol072_workload
    fi
    build/attnbwd info --arch sm_90 | sed -n '/cache/p'
    ;;
  test)
    install_packages
    build build
    if [ "${2:-}" = quick ]; then
      (cd build && ctest --output-on-failure -j "$JOBS" -LE slow)
      exit 0
    fi
    (cd build && ctest --output-on-failure -j "$JOBS")
    echo "== the same tests under AddressSanitizer and UndefinedBehaviorSanitizer"
    # The kernels the plain run compiled are read, not compiled again
    # (tests/CMakeLists.txt, ATTNBWD_TEST_KERNELS).
    build build-asan -DATTNBWD_SANITIZE=ON -DATTNBWD_TEST_KERNELS="$PWD/build/test-kernels"
    (cd build-asan && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j "$JOBS")
    ;;
  gpu-test)
    # The GPU tests come in parts by case index (tests/CMakeLists.txt): side by side, their fp64
    # references and NVRTC use every core.
    (cd build && ctest -L gpu -j "$JOBS" --output-on-failure)
    ;;
  *)
    echo "usage: ./dev.sh [main|test [quick]|gpu-test]" >&2
    exit 2
    ;;
esac
