#!/bin/bash
# The device commands of the fourth session of 2026-11-27 (H200), from the checkout's root, after the wheel
# install line: `bash run.sh 1` (lsd at `full`: a search and two re-measurement rounds, which 350 s did not fit
# on 2026-11-27), then `bash run.sh 2 SECONDS` (ten: the H200's preset, chunked, against the H100's, scan in
# bf16, each measured by `autotune run` in turn, A B A B ..., on this one GPU, within SECONDS).
# Dry run on the CPU (shorter bounds, tiny): DRY=1 OUT=/tmp/o bash benchmarks/gpu_runs/2026-11-27d-h200/run.sh 1
R=/tmp/res; rm -rf $R; mkdir -p $R
if [ -n "$DRY" ]; then dev="--device cpu"; size=tiny; scale=4; else dev=""; size=small; scale=1; fi
(nvidia-smi; python3 -c 'import torch; print(torch.__version__, torch.version.cuda)') > $R/machine.txt 2>&1
if [ "$1" = 1 ]; then
  full=full; [ -n "$DRY" ] && full=tiny
  timeout $((540 / scale)) python3 benchmarks/gpu_campaign.py --out $R/lsd $dev --workloads lsd --size $full \
    --timeout $((90 / scale)) --trial-timeout $((80 / scale)) --deadline $((520 / scale)) \
    --remeasure-top 2 --remeasure-rounds 2 > $R/lsd-campaign.txt 2>&1
  echo "after lsd: $SECONDS s" >> $R/machine.txt
else
  left=${2:-200}
  # each preset's config (input_proj and loop_step, which apply only to the loop, left out: run refuses them)
  A="--set recurrence=chunked --set chunk_size=26 --set compile=reduce-overhead --set precision=fp32
     --set batch_size=8 --set checkpoint_chunk=256 --set fused_output=false"
  B="--set recurrence=scan --set chunk_size=17 --set compile=reduce-overhead --set precision=bf16
     --set batch_size=4 --set checkpoint_chunk=1024 --set fused_output=true"
  [ -n "$DRY" ] && { A=${A/reduce-overhead/none}; B=${B/reduce-overhead/none}; B=${B/bf16/fp32}; }
  i=0
  # the first run of each also computes (A) or reads (B) the cached reference; a run starts only while a
  # whole run of 90 s (the compiled trials' warm-up included) still fits
  while [ $((SECONDS + 90 / scale)) -le $left ] && [ $i -lt 8 ]; do
    for name in A B; do
      [ $((SECONDS + 90 / scale)) -le $left ] || break
      i=$((i + 1))
      start=$SECONDS
      timeout $((120 / scale)) python3 -m autotune run -w ten $dev -s $size --studies $R/studies --json ${!name} \
        > $R/ten-$i-$name.json 2> $R/ten-$i-$name.err
      echo "ten run $i ($name): exit $?, $((SECONDS - start)) s" >> $R/machine.txt
    done
  done
  echo "after ten: $SECONDS s" >> $R/machine.txt
fi
tar czf $OUT/results.tgz -C $R .
