#!/usr/bin/env bash
# Fetches the FlashMLA sources openmla-bench's FlashMLA peer is built from (--peer flashmla), at the pinned commits:
# FlashMLA, and CUTLASS at the commit FlashMLA pins as its csrc/cutlass submodule. Needs git and network access.
#
#   bash bench/peers/get_flashmla.sh DIR [--minimal]
#   cmake -S . -B build -DOPENMLA_BENCH_FLASHMLA_DIR=DIR/FlashMLA && cmake --build build --target openmla-bench
#   build/openmla-bench --peer flashmla --format bf16,fp16
#
# --minimal keeps only what the peer compiles (FlashMLA's csrc/, CUTLASS's include/ and tools/util/include/, about
# 30 MB instead of several hundred): for copying the folder to a machine without network.
set -euo pipefail

FLASHMLA_URL=${FLASHMLA_URL:-https://github.com/deepseek-ai/FlashMLA.git}
FLASHMLA_COMMIT=9241ae3ef9bac614dd25e45e507e089f888280e0
CUTLASS_URL=${CUTLASS_URL:-https://github.com/NVIDIA/cutlass.git}
CUTLASS_COMMIT=147f5673d0c1c3dcf66f78d677fd647e4a020219

usage() { echo "usage: $0 DIR [--minimal]" >&2; exit 2; }
[[ $# -ge 1 && $# -le 2 ]] || usage
dest=$1
minimal=0
if [[ $# -eq 2 ]]; then [[ $2 == --minimal ]] || usage; minimal=1; fi

# One commit of a repository into DIR, without its history (a shallow fetch of that commit).
fetch_commit() {
  local url=$1 commit=$2 dir=$3
  mkdir -p "$dir"
  git -C "$dir" init -q
  git -C "$dir" fetch -q --depth 1 "$url" "$commit"
  git -C "$dir" -c advice.detachedHead=false checkout -q FETCH_HEAD
}

flashmla="$dest/FlashMLA"
if [[ -e $flashmla ]]; then
  echo "$flashmla exists; remove it first" >&2
  exit 1
fi
fetch_commit "$FLASHMLA_URL" "$FLASHMLA_COMMIT" "$flashmla"
pinned=$(git -C "$flashmla" ls-tree HEAD csrc/cutlass | awk '{print $3}')
if [[ $pinned != "$CUTLASS_COMMIT" ]]; then
  echo "FlashMLA $FLASHMLA_COMMIT pins CUTLASS $pinned, not $CUTLASS_COMMIT" >&2
  exit 1
fi
rmdir "$flashmla/csrc/cutlass" 2>/dev/null || true
fetch_commit "$CUTLASS_URL" "$CUTLASS_COMMIT" "$flashmla/csrc/cutlass"

if [[ $minimal -eq 1 ]]; then
  # The peer compiles FlashMLA's csrc/ against CUTLASS's headers: nothing else is kept.
  find "$flashmla" -mindepth 1 -maxdepth 1 ! -name csrc -exec rm -rf {} +
  find "$flashmla/csrc/cutlass" -mindepth 1 -maxdepth 1 ! -name include ! -name tools -exec rm -rf {} +
  find "$flashmla/csrc/cutlass/tools" -mindepth 1 -maxdepth 1 ! -name util -exec rm -rf {} +
  find "$flashmla/csrc/cutlass/tools/util" -mindepth 1 -maxdepth 1 ! -name include -exec rm -rf {} +
fi
echo "FlashMLA $FLASHMLA_COMMIT with CUTLASS $CUTLASS_COMMIT in $flashmla ($(du -sh "$flashmla" | cut -f1))"
echo "configure with: -DOPENMLA_BENCH_FLASHMLA_DIR=$(cd "$flashmla" && pwd)"
