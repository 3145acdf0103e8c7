#!/bin/bash
# The first device command of 2026-11-27 (asked for an H100, given an H200), from the checkout's root, after the wheel install line.
# Bounded so that the tarball is written well inside the 600 s command limit.
# Dry run on the CPU: DRY=1 OUT=/tmp/o bash benchmarks/gpu_runs/2026-11-27-h200/run.sh
R=/tmp/res; rm -rf $R; mkdir -p $R
if [ -n "$DRY" ]; then dev="--device cpu"; size=tiny; else dev=""; size=small; fi
(nvidia-smi; python3 -c 'import torch; print(torch.__version__, torch.version.cuda)') > $R/machine.txt 2>&1
# device detection as changed on 2026-11-26 (a CUDA build of torch is still asked)
(time timeout 60 python3 -m autotune devices) > $R/devices.txt 2>&1
if [ -z "$DRY" ]; then
  # lsd's cuda_graph fix: as-is should now be right, model-freed wrong
  timeout 60 python3 benchmarks/lsd_graph_race.py --variants as-is model-freed > $R/lsd-graph-race.txt 2>&1
  timeout 150 python3 -m pytest -m gpu -q -p no:cacheprovider tests/ > $R/pytest-gpu.txt 2>&1
fi
echo "after devices, race and pytest: $SECONDS s" >> $R/machine.txt
# lsd at small: does a search now find correct graphed configs
timeout 190 python3 benchmarks/gpu_campaign.py --out $R/lsd $dev --workloads lsd --size $size --timeout 90 \
  --trial-timeout 45 --deadline 180 --remeasure-top 2 --remeasure-rounds 2 > $R/lsd-campaign.txt 2>&1
echo "after lsd: $SECONDS s" >> $R/machine.txt
# chmm at small with what is left: does the per-kernel chunk_size find the scan's large chunks
left=$((545 - SECONDS))
if [ $left -ge 120 ]; then
  timeout $((left + 10)) python3 benchmarks/gpu_campaign.py --out $R/chmm $dev --workloads chmm --size $size \
    --timeout $((left - 205 > 50 ? 50 : left - 205 < 20 ? 20 : left - 205)) --deadline $left \
    --remeasure-top 2 --remeasure-rounds 2 > $R/chmm-campaign.txt 2>&1
fi
echo "after chmm: $SECONDS s" >> $R/machine.txt
tar czf $OUT/results.tgz -C $R .
