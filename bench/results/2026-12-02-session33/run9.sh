#!/bin/bash
# Session 33 run 9: issue #4's ratios at e7b467f with each format in its own process, in a rotating order over four
# rounds (run 6 timed them in one process each, bf16 first, and the format run second or third ran on a warmer GPU).
set -u
P=/tmp/pre; mkdir -p $P; xz -dc .carry/s33/bench_final.xz > $P/openmla-bench; chmod +x $P/openmla-bench
export OPENMLA_COMMIT=e7b467f
mkdir -p $OUT/r
run() {  # tag variant round args...
  local tag=$1 v=$2 r=$3; shift 3
  timeout 60 $P/openmla-bench "$@" --check-samples 0 --json $OUT/r/${tag}_${v}_$r.json > /dev/null 2>&1 || echo "$tag $v $r failed"
}
for r in 1 2 3 4; do
  case $r in 1) o="bf16 e4m3 dsmla";; 2) o="dsmla e4m3 bf16";; 3) o="e4m3 dsmla bf16";; 4) o="bf16 dsmla e4m3";; esac
  for v in $o; do
    case $v in bf16) f=bf16;; e4m3) f=fp8_e4m3;; dsmla) f=fp8_ds_mla;; esac
    run mb $v $r --format $f --shape 128,1,16,16384
  done
  case $r in 1) o="bf16 e4m3 fp8m";; 2) o="fp8m e4m3 bf16";; 3) o="e4m3 fp8m bf16";; 4) o="bf16 fp8m e4m3";; esac
  for v in $o; do
    case $v in bf16) a="--format bf16";; e4m3) a="--format fp8_e4m3";; fp8m) a="--format fp8_e4m3 --fp8-math qk_and_pv";; esac
    run cb $v $r $a --shape 128,2,128,8192
  done
done
python3 - $OUT/r <<'PY'
import glob, json, os, statistics, sys
t = {}
for p in glob.glob(sys.argv[1] + '/*.json'):
    tag, v, r = os.path.basename(p)[:-5].split('_')
    for x in json.load(open(p))['results']:
        t.setdefault((tag, v), []).append(x['time_us'])
for tag, others in (('mb', ('e4m3', 'dsmla')), ('cb', ('e4m3', 'fp8m'))):
    bf = statistics.median(t[(tag, 'bf16')])
    print(tag, 'bf16 median %.1f us (rounds %s)' % (bf, ' '.join('%.1f' % x for x in t[(tag, 'bf16')])))
    for v in others:
        m = statistics.median(t[(tag, v)])
        print(tag, v, 'median %.1f us (rounds %s): %.3fx the bf16 kernel' % (m, ' '.join('%.1f' % x for x in t[(tag, v)]), bf / m))
PY
cd $OUT && tar cJf logs.tar.xz r && rm -r r
