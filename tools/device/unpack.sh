#!/usr/bin/env bash
# On the GPU machine: unpack the carried binaries next to this script.
cd "$(dirname "$0")" && [ -d bin ] || tar -xJf bin.tar.xz
