#!/bin/bash
# The device commands of the second session of 2026-11-27 (H200), from the checkout's root, after the wheel
# install line: `bash run.sh 1` (H200 presets of ten and latentwire, the two workloads with none),
# then `bash run.sh 2 SECONDS` (a longer chmm part, bounded by what the lease has left).
# Each part is bounded so that its tarball is written well inside the 600 s command limit.
# Dry run on the CPU: DRY=1 OUT=/tmp/o bash benchmarks/gpu_runs/2026-11-27b-h200/run.sh 1
R=/tmp/res; rm -rf $R; mkdir -p $R
if [ -n "$DRY" ]; then dev="--device cpu"; size=tiny; else dev=""; size=small; fi
(nvidia-smi; python3 -c 'import torch; print(torch.__version__, torch.version.cuda)') > $R/machine.txt 2>&1
if [ "$1" = 1 ]; then
  # ten took 266 s on the H100 with --timeout 90 (2026-11-25); latentwire 208 s with --timeout 60
  timeout 290 python3 benchmarks/gpu_campaign.py --out $R/ten $dev --workloads ten --size $size --timeout 90 \
    --trial-timeout 80 --deadline 280 --remeasure-top 2 --remeasure-rounds 2 > $R/ten-campaign.txt 2>&1
  echo "after ten: $SECONDS s" >> $R/machine.txt
  left=$((530 - SECONDS))
  if [ $left -ge 150 ]; then
    timeout $((left + 10)) python3 benchmarks/gpu_campaign.py --out $R/latentwire $dev --workloads latentwire \
      --size $size --timeout $((left - 150 > 60 ? 60 : left - 150 < 15 ? 15 : left - 150)) --trial-timeout 60 \
      --deadline $left --remeasure-top 2 --remeasure-rounds 2 > $R/latentwire-campaign.txt 2>&1
  fi
  echo "after latentwire: $SECONDS s" >> $R/machine.txt
else
  # chmm: does a longer search find the scan's large chunks under the per-kernel chunk_size names
  left=${2:-330}
  timeout $((left + 10)) python3 benchmarks/gpu_campaign.py --out $R/chmm $dev --workloads chmm --size $size \
    --timeout $((left - 210 < 20 ? 20 : left - 210)) --deadline $left --remeasure-top 2 --remeasure-rounds 2 \
    > $R/chmm-campaign.txt 2>&1
  echo "after chmm: $SECONDS s" >> $R/machine.txt
fi
tar czf $OUT/results.tgz -C $R .
