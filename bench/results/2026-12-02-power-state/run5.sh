#!/bin/bash
# Session 29 run 5: mbarrier waits with a suspend-time hint. base = HEAD's kernels (bench with replay_us);
# idle = the copy-issuing / expanding producer threads wait with the hint (mbarrier_wait_idle); all = every
# mbarrier wait with the hint. Same-run A/B, interleaved rounds.
set -u
for v in replays idle all; do mkdir -p /tmp/ab/$v; xz -dc .carry/s29/bench_$v.xz > /tmp/ab/$v/openmla-bench; chmod +x /tmp/ab/$v/openmla-bench; done
BINS="base=/tmp/ab/replays idle=/tmp/ab/idle all=/tmp/ab/all"
export BINS
OUT=$OUT/bf16 ROUNDS=3 bash scripts/ab_env.sh --backend sm90 --format bf16 --shape 128,2,128,1024 --shape 128,4,128,1024 \
  --shape 128,1,128,16384 --shape 128,1,64,1024 --shape 128,1,64,16384 --shape 128,1,16,16384 --shape 1,1,128,32768 \
  --shape 16,1,16,4096 --check-samples 0 > $OUT/ab_bf16.txt 2>&1
OUT=$OUT/fp8 ROUNDS=2 bash scripts/ab_env.sh --backend sm90 --format fp8_e4m3,fp8_ds_mla --shape 128,1,16,16384 \
  --shape 128,2,128,8192 --shape 128,1,64,16384 --check-samples 0 > $OUT/ab_fp8.txt 2>&1
OUT=$OUT/fp8math ROUNDS=2 bash scripts/ab_env.sh --backend sm90 --format fp8_e4m3 --fp8-math qk_and_pv --shape 128,2,128,8192 \
  --shape 128,1,64,16384 --check-samples 0 > $OUT/ab_fp8_math.txt 2>&1
cd $OUT && tar cJf ab_json.tar.xz bf16 fp8 fp8math && rm -r bf16 fp8 fp8math && cd - >/dev/null
tail -12 $OUT/ab_bf16.txt; tail -9 $OUT/ab_fp8.txt; tail -5 $OUT/ab_fp8_math.txt
