#!/usr/bin/env bash
# On the GPU machine: unpack the carried binaries, and the text corpora where
# bundle.sh --data packed them, next to this script.
cd "$(dirname "$0")" || exit 1
[ -d bin ] || tar -xJf bin.tar.xz
[ ! -f data/text.tar.xz ] || [ -d data/fortunes ] || tar -C data -xJf data/text.tar.xz
