#!/usr/bin/env bash
# Installs vdnn to a scratch prefix and uses it as an outside program would: the C example built with
# pkg-config alone and run, the same through find_package(vdnn); libvdnn.so exports vdnn_ symbols only; and
# the commands in tools/ include no header of src/.
# Usage: install_example.sh BUILD_DIR   (run from the repository root; CTest does both)
set -uo pipefail

BUILD=${1:?usage: install_example.sh BUILD_DIR}
PREFIX=$(mktemp -d)
trap 'rm -rf "$PREFIX"' EXIT
fails=0
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }

cmake --install "$BUILD" --prefix "$PREFIX" >"$PREFIX/install.log" 2>&1 || { cat "$PREFIX/install.log"; exit 1; }
pc=$(find "$PREFIX" -name vdnn.pc | head -1)
[ -n "$pc" ] || { echo "FAIL: no vdnn.pc installed"; exit 1; }
export PKG_CONFIG_PATH
PKG_CONFIG_PATH=$(dirname "$pc")
libdir=$(pkg-config --variable=libdir vdnn)

# Only the public API leaves the shared library.
syms=$(nm -D --defined-only "$libdir/libvdnn.so" | awk '{print $3}')
[ -n "$syms" ] || bad "libvdnn.so exports nothing"
others=$(grep -v '^vdnn_' <<<"$syms" || true)
[ -z "$others" ] || bad "libvdnn.so exports symbols outside the API: $(echo $others | head -c 300)"
grep -qx vdnn_plan_create <<<"$syms" || bad "libvdnn.so does not export vdnn_plan_create"
readelf -d "$libdir/libvdnn.so" | grep -q 'SONAME.*libvdnn\.so\.' || bad "libvdnn.so has no versioned soname"
[ -f "$libdir/libvdnn.a" ] || bad "no static libvdnn.a installed"
[ ! -e "$PREFIX/include/vdnn/dist.h" ] || bad "the MPI runtime's header was installed with the library"

# The commands see the public headers only.
if grep -n '#include "' tools/*.c tools/*.h | grep -v '"cmd_[a-z_]*\.h"'; then bad "a file in tools/ includes a header that is not its own"; fi

# The example, built with nothing but pkg-config, and run.
# shellcheck disable=SC2046
if cc -std=c11 -Wall -Wextra -Werror examples/train_plan.c $(pkg-config --cflags --libs vdnn) \
      -Wl,-rpath,"$libdir" -o "$PREFIX/train_plan" 2>"$PREFIX/cc.log"; then
    if "$PREFIX/train_plan" models/lenet.cfg >"$PREFIX/out" 2>&1; then
        grep -q '^plan: lenet, policy auto, peak .* (fits)' "$PREFIX/out" || bad "example: no plan line: $(cat "$PREFIX/out")"
        [ "$(grep -c '^step [0-9]: loss [0-9.]*$' "$PREFIX/out")" = 3 ] || bad "example: not three steps: $(cat "$PREFIX/out")"
    else
        bad "example failed: $(cat "$PREFIX/out")"
    fi
else
    bad "example does not build against the installed library: $(cat "$PREFIX/cc.log")"
fi

# The same program through the CMake package.
mkdir -p "$PREFIX/cm"
cat >"$PREFIX/cm/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.20)
project(use_vdnn C)
find_package(vdnn REQUIRED)
add_executable(train_plan $PWD/examples/train_plan.c)
target_link_libraries(train_plan PRIVATE vdnn::vdnn)
CM
if cmake -S "$PREFIX/cm" -B "$PREFIX/cm/build" -DCMAKE_PREFIX_PATH="$PREFIX" ${VDNN_EXAMPLE_CFLAGS:+-DCMAKE_C_FLAGS="$VDNN_EXAMPLE_CFLAGS"} \
      >"$PREFIX/cm.log" 2>&1 && cmake --build "$PREFIX/cm/build" >>"$PREFIX/cm.log" 2>&1; then
    "$PREFIX/cm/build/train_plan" models/lenet.cfg >/dev/null 2>&1 || bad "example built by find_package(vdnn) failed"
else
    bad "find_package(vdnn) does not build the example: $(tail -20 "$PREFIX/cm.log")"
fi

# The installed Python package finds the library installed beside it (no VDNN_LIBRARY), when Debian's python3
# has numpy and cffi; a sanitized library needs the ASan runtime preloaded into the interpreter.
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
pydir=$(find "$PREFIX" -type d -path '*dist-packages/vdnn' | head -1)
if [ -z "$pydir" ]; then
    bad "the Python package was not installed"
elif "$PY" -c 'import numpy, cffi' 2>/dev/null; then
    pre=""
    [[ "${VDNN_EXAMPLE_CFLAGS:-}" == *sanitize* ]] && pre=$(cc -print-file-name=libasan.so)
    got=$(cd "$PREFIX" && env -u VDNN_LIBRARY PYTHONPATH="$(dirname "$pydir")" ${pre:+LD_PRELOAD=$pre ASAN_OPTIONS=detect_leaks=0} \
          "$PY" -c 'import vdnn; print(vdnn.library_path); print(vdnn.version())' 2>&1)
    echo "install_example: the installed Python package loaded $(head -1 <<<"$got")"
    [[ "$got" == "$PREFIX"/*/libvdnn.so* ]] || bad "the installed Python package did not load the installed library: $got"
else
    echo "install_example: $PY lacks numpy or cffi: the installed Python package is not tried"
fi

echo "install_example: $fails failed"
[ "$fails" = 0 ]
