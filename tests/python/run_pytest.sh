#!/usr/bin/env bash
# Runs one file of the Python package's tests under pytest for CTest: exit 77 (shown as skipped) with the
# reason when Debian's python3-numpy, python3-cffi or python3-pytest is missing. In a sanitizer build
# libvdnn.so needs the ASan runtime loaded first, so the interpreter runs with it preloaded.
# Usage: run_pytest.sh PYTHON TEST_FILE   (CTest sets VDNN_LIBRARY, VDNN_CLI, PYTHONPATH, VDNN_SANITIZE)
set -uo pipefail
PY=${1:?usage: run_pytest.sh PYTHON TEST_FILE}
FILE=${2:?usage: run_pytest.sh PYTHON TEST_FILE}

if ! missing=$("$PY" - <<'PYEOF'
import importlib.util, sys
gone = [m for m in ("numpy", "cffi", "pytest") if importlib.util.find_spec(m) is None]
print(" ".join(gone))
sys.exit(1 if gone else 0)
PYEOF
); then
    echo "skipped: $PY lacks the module(s) $missing (scripts/setup.sh installs python3-numpy python3-cffi python3-pytest)"
    exit 77
fi

if [ "${VDNN_SANITIZE:-OFF}" = ON ]; then
    asan=$(cc -print-file-name=libasan.so)
    if [ ! -e "$asan" ]; then
        echo "skipped: a sanitizer build's libvdnn.so needs libasan.so preloaded into $PY, and cc does not find it"
        exit 77
    fi
    # Leaks are the C tests' to check (the interpreter keeps objects alive at exit by design): off, after
    # whatever the caller set, so it wins.
    export LD_PRELOAD=$asan ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0:verify_asan_link_order=0
fi
# No cache or bytecode written into the source tree.
export PYTHONDONTWRITEBYTECODE=1
exec "$PY" -m pytest -q -p no:cacheprovider "$FILE"
