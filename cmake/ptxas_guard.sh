#!/bin/sh
# CUDA compiler launcher of the openmla target (CMakeLists.txt): runs the compile, then fails it if ptxas serialized
# wgmma anywhere. ptxas reports some causes as "info", not as a warning (C7511: too few registers for the wgmma
# pipeline), so -Xptxas=-Werror lets them through; with serialized wgmma the seesaw schedule runs at 0.71-0.79x of
# its speed.
log=$(mktemp) || exit 1
"$@" 2>"$log"
rc=$?
cat "$log" >&2
if [ "$rc" -eq 0 ] && grep -q "wgmma.mma_async instructions are serialized" "$log"; then
  echo "error: ptxas serialized wgmma (above); the sm90 kernels must keep their wgmma asynchronous" \
       "(docs/hopper-kernel.md, \"What ptxas needs so that wgmma stays asynchronous\")" >&2
  rc=1
fi
rm -f "$log"
exit "$rc"
