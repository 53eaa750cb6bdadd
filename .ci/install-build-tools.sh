#!/usr/bin/env sh
# Installs what benchmarks/real_judge/judge.py needs to build llama.cpp's llama-server (cmake,
# ninja, a C++ compiler) from Debian, when any of them is missing.
set -eu
if command -v cmake >/dev/null && command -v ninja >/dev/null && command -v c++ >/dev/null; then
    exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
$SUDO apt-get install -y -qq --no-install-recommends cmake ninja-build g++ >/dev/null
command -v cmake >/dev/null && command -v ninja >/dev/null && command -v c++ >/dev/null
