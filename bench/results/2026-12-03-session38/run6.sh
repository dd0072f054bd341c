#!/bin/bash
# Session 38 run 6: the two modes of b=128, s_q=2, h_q=128, 16K (sessions 37-38: ~1,710-1,755 or ~1,760-1,845 µs from
# one process to the next, same seed and inputs). Eight processes of b0ad2ba's build, each timing the shape three
# times in a row (--shape repeated: one allocation, the same buffers), then three with --allocation per-config (a
# cudaMalloc / cudaFree per configuration), so that within-process and between-process spread can be told apart.
set -u
P=/tmp/pre; mkdir -p $P; xz -dc .carry/s38/bench_hoist.xz > $P/ob; chmod +x $P/ob
S=128,2,128,16384
for i in 1 2 3 4 5 6 7 8; do
  $P/ob --backend sm90 --shape $S --shape $S --shape $S --check-samples 0 --json $OUT/p$i.json > /dev/null 2>&1
  python3 -c "import json,sys; print('process', sys.argv[2], 'arena', ' '.join('%.1f' % r['time_us'] for r in json.load(open(sys.argv[1]))['results']))" $OUT/p$i.json $i
done
for i in 1 2 3; do
  $P/ob --backend sm90 --shape $S --shape $S --shape $S --check-samples 0 --allocation per-config --json $OUT/q$i.json > /dev/null 2>&1
  python3 -c "import json,sys; print('process', sys.argv[2], 'per-config', ' '.join('%.1f' % r['time_us'] for r in json.load(open(sys.argv[1]))['results']))" $OUT/q$i.json $i
done
