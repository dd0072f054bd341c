#!/bin/bash
# Session 29 run 11 (93bb9f7): openmla-bench --sustain-ms 300, the floors' shapes and the FP8 issue's shapes with the
# GPU at its power cap, next to the same shapes timed the default way in the same run.
set -u
mkdir -p /tmp/pre; xz -dc .carry/s29/bench_sustain.xz > /tmp/pre/openmla-bench; chmod +x /tmp/pre/openmla-bench
B=/tmp/pre/openmla-bench
A="--anchors .carry/s29/h200-anchors.csv"
F="--shape 128,1,16,16384 --shape 128,1,16,32768 --shape 64,1,16,4096 --shape 16,1,16,4096 --shape 1,1,16,4096
   --shape 1,1,16,32768 --shape 1,1,128,32768 --shape 128,1,128,16384 --shape 128,2,128,16384 --shape 64,2,64,4096
   --shape 128,4,128,1024 --shape 16,4,128,32768 --shape 128,1,128,4096,varlen --shape 128,1,16,16384,varlen"
$B $F $A --check-samples 1 --json $OUT/floors_default.json > $OUT/floors_default.txt 2>&1
$B $F $A --check-samples 1 --sustain-ms 300 --json $OUT/floors_sustained.json > $OUT/floors_sustained.txt 2>&1
$B --backend sm90 --shape 128,1,16,16384 --shape 128,1,16,32768 --sustain-ms 300 --check-samples 0 --json $OUT/tp8_sm90_sustained.json > /dev/null 2>&1
$B --grid fp8 --format bf16,fp8_e4m3,fp8_ds_mla --sustain-ms 300 --json $OUT/fp8_sustained.json > $OUT/fp8_sustained.txt 2>&1
$B --grid fp8 --format fp8_e4m3 --fp8-math qk_and_pv --sustain-ms 300 --json $OUT/fp8_math_sustained.json > $OUT/fp8_math_sustained.txt 2>&1
python3 - <<'PY'
import json, os
out = os.environ['OUT']
def load(n):
    return {(x['format'], x['b'], x['s_q'], x['h_q'], x['s_k'], x['varlen']): x for x in json.load(open(f'{out}/{n}.json'))['results']}
d, s = load('floors_default'), load('floors_sustained')
print('shape | default us | sustained us | backend | FlashMLA anchor | err')
for k in d:
    print('%s %d/%d/%d/%d%s' % (k[0], *k[1:5], ' varlen' if k[5] else ''), '| %.1f | %.1f | %s | %s | %.1e' % (d[k]['time_us'], s[k]['time_us'], s[k]['backend'], d[k]['anchor_us'], s[k]['max_rel_err']))
t = load('tp8_sm90_sustained')
for k, x in t.items(): print('sm90 forced, sustained', k[1:5], '%.1f' % x['time_us'])
f, m = load('fp8_sustained'), load('fp8_math_sustained')
for k, x in sorted(f.items(), key=lambda kv: kv[0][1:]):
    print('fp8 grid sustained', k[0], k[1:5], '%.1f' % x['time_us'], x['backend'])
for k, x in m.items(): print('fp8 math sustained', k[1:5], '%.1f' % x['time_us'])
PY
