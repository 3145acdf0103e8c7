#!/bin/bash
# The device commands of the third session of 2026-11-27 (H200), from the checkout's root, after the wheel
# install line: `bash run.sh 1` (a longer ten search, whose compiled trials ran past 80 s on 2026-11-27),
# then `bash run.sh 2 SECONDS` (one more chmm search with chunk_size per kernel, bounded by what is left).
# Each part is bounded so that its tarball is written well inside the 600 s command limit.
# Dry run on the CPU (shorter bounds, tiny): DRY=1 OUT=/tmp/o bash benchmarks/gpu_runs/2026-11-27c-h200/run.sh 1
R=/tmp/res; rm -rf $R; mkdir -p $R
if [ -n "$DRY" ]; then dev="--device cpu"; size=tiny; scale=4; else dev=""; size=small; scale=1; fi
(nvidia-smi; python3 -c 'import torch; print(torch.__version__, torch.version.cuda)') > $R/machine.txt 2>&1
if [ "$1" = 1 ]; then
  # the README's command for ten on the H200: compiled trials need more than 80 s there
  timeout $((550 / scale)) python3 benchmarks/gpu_campaign.py --out $R/ten $dev --workloads ten --size $size \
    --timeout $((240 / scale)) --trial-timeout $((150 / scale)) --deadline $((540 / scale)) \
    --remeasure-top 2 --remeasure-rounds 2 > $R/ten-campaign.txt 2>&1
  echo "after ten: $SECONDS s" >> $R/machine.txt
else
  left=${2:-255}
  timeout $((left + 10)) python3 benchmarks/gpu_campaign.py --out $R/chmm $dev --workloads chmm --size $size \
    --timeout $((left - 205 < 20 ? 20 : left - 205)) --deadline $left --remeasure-top 2 --remeasure-rounds 2 \
    > $R/chmm-campaign.txt 2>&1
  echo "after chmm: $SECONDS s" >> $R/machine.txt
fi
tar czf $OUT/results.tgz -C $R .
