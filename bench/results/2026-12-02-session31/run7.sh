#!/bin/bash
# Session 31 run 7 (5784a0d): run 6 ruled out the GPU's temperature. Is the slow sustained TP8 row of a grid
# sequence (16K right after 4K) a property of the process's earlier configurations? Same shape alone, after 4K,
# after 1K and 4K, alone again; sustained (--sustain-ms 300) and, for two of them, the default timing.
set -u
P=/tmp/pre; mkdir -p $P; xz -dc .carry/s31/bench_final.xz > $P/openmla-bench; chmod +x $P/openmla-bench
B="$P/openmla-bench --check-samples 0"
T16="--shape 128,1,16,16384"
i=0
run() { i=$((i+1)); echo "== $i: $*"; $B "$@" --json $OUT/run7_$i.json | grep -E "^\[" | sed 's/ bf16:/:/'; }
run $T16 --sustain-ms 300
run --shape 128,1,16,4096 $T16 --sustain-ms 300
run --shape 128,1,16,1024 --shape 128,1,16,4096 $T16 --sustain-ms 300
run $T16 --sustain-ms 300
run --shape 128,1,16,4096 $T16 --shape 128,1,16,32768 --sustain-ms 300 --backend portable
run $T16 --sustain-ms 300 --backend portable
run --shape 128,1,16,4096 $T16
run $T16
run --grid deepseek --filter b=128,h_q=16 --sustain-ms 300
run --grid deepseek --filter b=128,h_q=16,s_q=1 --sustain-ms 300
cd $OUT && tar cJf run7.tar.xz run7_*.json && rm run7_*.json
