#!/usr/bin/env bash
# Installs the Debian packages vdnn needs (only those missing), as root or through sudo. With --test, also what
# `make test` needs beyond the build: PyTorch, torchvision and ONNX for Python, with which test_torchvision
# exports torchvision's networks and computes their references (it skips without them). Both install `fortunes`
# and `fortunes-min`, whose English quotations are the default text of sequence models (docs/sequence.md).
set -euo pipefail
pkgs=(build-essential cmake pkg-config zlib1g-dev libdnnl-dev libopenblas-dev libopenblas-openmp-dev libcmocka-dev
      dataset-fashion-mnist libopenmpi-dev openmpi-bin python3 python3-numpy python3-cffi python3-pytest
      libonnx-dev protobuf-c-compiler libprotobuf-c-dev fortunes fortunes-min)
if [ "${1:-}" = "--test" ]; then
  pkgs=(python3-torch python3-torchvision python3-onnx python3-numpy fortunes fortunes-min)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "setup: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
