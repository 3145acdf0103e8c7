#!/bin/bash
# The one device command of 2026-11-26 (H200), from the checkout's root, after the wheel install line.
# Bounded so that the tarball is written well inside the 600 s command limit.
# Dry run on the CPU: DRY=1 OUT=/tmp/o bash benchmarks/gpu_runs/2026-11-26-h200/run.sh
R=/tmp/res; rm -rf $R; mkdir -p $R
if [ -n "$DRY" ]; then dev="--device cpu"; size=tiny; else dev=""; size=small; fi
(nvidia-smi; python3 -c 'import torch; print(torch.__version__, torch.version.cuda)') > $R/machine.txt 2>&1
if [ -z "$DRY" ]; then
  timeout 60 python3 benchmarks/lsd_graph_race.py --variants as-is wrap-only keep-x keep-t keep-out keep-last \
    > $R/lsd-graph-race.txt 2>&1
  timeout 120 python3 -m pytest -m gpu -q -p no:cacheprovider tests/ > $R/pytest-gpu.txt 2>&1
fi
echo "after race and pytest: $SECONDS s" >> $R/machine.txt
# vlm_mc: does the fp32 check (dropout_off) pass configs other than the reference's batch; the meter's marks
timeout 300 python3 benchmarks/gpu_campaign.py --out $R/vlm_mc $dev --workloads vlm_mc --size $size --timeout 60 \
  --trial-timeout 45 --deadline 280 --remeasure-top 2 --remeasure-rounds 2 > $R/vlm_mc-campaign.txt 2>&1
echo "after vlm_mc: $SECONDS s" >> $R/machine.txt
# chmm with what is left: an H200 preset (the H100 has one)
left=$((540 - SECONDS))
if [ $left -ge 100 ]; then
  timeout $((left + 10)) python3 benchmarks/gpu_campaign.py --out $R/chmm $dev --workloads chmm --size $size \
    --timeout $((left - 80)) --deadline $left --remeasure-top 2 --remeasure-rounds 2 > $R/chmm-campaign.txt 2>&1
fi
echo "after chmm: $SECONDS s" >> $R/machine.txt
tar czf $OUT/results.tgz -C $R .
