#!/bin/bash
# Session 38 run 1: ptxas's --register-usage-level=10 (FlashMLA's flag; ptxas's default is 5) on the sm90 kernels, and
# the softmax's rescale factor alpha by ex2.approx.ftz instead of the accurate exp2f (wide and 16-bit narrow kernels),
# each alone and together, against 6c3d50e's build and FlashMLA's decode kernel (fm, session 36's scratch build) in one
# machine start; then the 96-row shapes (s_q=3, h_q=32) with 1244d53's binary (pre: before the spare P_b), which
# session 37's run 8 was to time. Binaries in the gitignored .carry/s38/ (built here from 6c3d50e + the diffs).
set -u
P=/tmp/pre; mkdir -p $P
for v in base r10 alpha r10alpha; do mkdir -p $P/$v; xz -dc .carry/s38/bench_$v.xz > $P/$v/openmla-bench; chmod +x $P/$v/openmla-bench; done
mkdir -p $P/pre; xz -dc .carry/s38/bench_o.xz > $P/pre/openmla-bench; xz -dc .carry/s38/fm_fast.xz > $P/fm; chmod +x $P/pre/openmla-bench $P/fm
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader
A="--backend sm90 --anchors .carry/s38/h200-anchors.csv"
BINS="base=$P/base r10=$P/r10 alpha=$P/alpha r10alpha=$P/r10alpha" EXTRA="fm=$P/fm" OUT=$OUT/bf16 \
  SHAPES="128,1,128,16384 128,2,128,16384 64,2,64,4096 128,4,128,1024 128,1,128,1024 16,4,128,32768 1,1,128,32768 128,1,64,4096 128,1,16,16384 64,1,16,4096 128,1,128,4096,varlen" \
  bash scripts/ab_env.sh $A | tee $OUT/table_bf16.md
echo "bf16 done at ${SECONDS} s"
BINS="base=$P/base r10=$P/r10 alpha=$P/alpha r10alpha=$P/r10alpha" OUT=$OUT/e4m3 SHAPES="128,2,128,8192 128,1,16,16384" \
  bash scripts/ab_env.sh $A --format fp8_e4m3 | tee $OUT/table_e4m3.md
BINS="base=$P/base r10=$P/r10 alpha=$P/alpha r10alpha=$P/r10alpha" OUT=$OUT/e4m3m SHAPES="128,2,128,8192" \
  bash scripts/ab_env.sh $A --format fp8_e4m3 --fp8-math qk_and_pv | tee $OUT/table_fp8math.md
BINS="base=$P/base r10=$P/r10 alpha=$P/alpha r10alpha=$P/r10alpha" OUT=$OUT/dsmla SHAPES="128,1,16,16384 128,1,64,16384" \
  bash scripts/ab_env.sh $A --format fp8_ds_mla | tee $OUT/table_dsmla.md
echo "fp8 done at ${SECONDS} s"
BINS="pre=$P/pre base=$P/base" EXTRA="fm=$P/fm" OUT=$OUT/rows96 SHAPES="128,3,32,4096 128,3,32,16384 64,3,32,4096 16,3,32,16384" \
  bash scripts/ab_env.sh $A | tee $OUT/table_rows96.md
echo "all done at ${SECONDS} s"
cd $OUT && tar cJf ab_logs.tar.xz bf16 e4m3 e4m3m dsmla rows96 && rm -r bf16 e4m3 e4m3m dsmla rows96
