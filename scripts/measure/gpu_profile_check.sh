#!/usr/bin/env bash
# Every GPU figure of issue "The GPU profile" (item 4) in ONE call of a lent GPU machine (the
# device tool runs a command for at most 10 minutes): first the GPU profile's one-call
# training (scripts/gpu_train.sh dsd: the model to score back on the CPU machine, and the
# loop's own rate per stage in its train_summary.json), then the step benchmarks the goals
# name, each under its own limit inside DEADLINE: the GPU profile's stages 1-3 and the demo's
# stage 3 replayed, the paper profile's stage 3 replayed in bf16, the GPU profile with 8 style
# references (what they cost, while time is left); last a table of the loop's rate against
# the benchmark's (scripts/measure/gpu_profile_summary.py).
#
#   device run, carry ["results/subsets/dsd"] (36 MB for the demo; `snakemake --cores all
#   subsets__dsd` builds it), timeout_s 600:
#       bash scripts/measure/gpu_profile_check.sh
#   smoke test without a GPU (minutes on 2 cores; the graphs fall back to eager):
#       DEVICE=cpu TRAIN_SECONDS=150 DEADLINE=120 ITERS=2 \
#       SET="train.total_iters=60 train.stage2_start=20 train.stage3_start=40 ..." \
#       bash scripts/measure/gpu_profile_check.sh /tmp/check
#
# Environment: TRAIN_SECONDS (330: gpu_train.sh's budget), DEADLINE (170 s for the
# benchmarks), ITERS (20 timed iterations per stage), DEVICE, PYTHON, SET (passed on to
# gpu_train.sh). Writes $OUT (else the first argument, else results/gpu_profile_check):
# check.log (everything), train/dsd/ (the model), gpu_train.log. Back on the CPU machine:
# docs/training.md, "Training on a GPU machine", scores the model.
set -u
out=${OUT:-${1:-results/gpu_profile_check}}
mkdir -p "$out"
log=$out/check.log
: >"$log"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} TOKENIZERS_PARALLELISM=false
py=${PYTHON:-python3}
dev=${DEVICE:-cuda}
it=${ITERS:-20}

echo "=== gpu-train: scripts/gpu_train.sh dsd (TRAIN_SECONDS=${TRAIN_SECONDS:-330})" | tee -a "$log"
OUT=$out DEVICE=$dev PYTHON=$py TRAIN_SECONDS=${TRAIN_SECONDS:-330} \
    bash scripts/gpu_train.sh dsd 2>&1 | tee -a "$log" | grep -E "^gpu_train|^fit_schedule|^\[train\] (text|done|deadline)"
echo "=== gpu-train rc=${PIPESTATUS[0]}" | tee -a "$log"

start=$(date +%s)
deadline=${DEADLINE:-170}
piece() {  # piece NAME SECONDS ARGS...: one bench_train.py run under what is left of DEADLINE
    local name=$1 limit=$2 left
    shift 2
    left=$((deadline - ($(date +%s) - start)))
    ((left < limit)) && limit=$left
    if ((limit < 15)); then
        echo "=== bench $name skipped: the deadline is reached" | tee -a "$log"
        return
    fi
    echo "=== bench $name (limit $limit s): bench_train.py $*" | tee -a "$log"
    timeout "$limit" "$py" scripts/measure/bench_train.py --device "$dev" --no-reference "$@" \
        >>"$log" 2>&1
    echo "=== bench $name rc=$?" | tee -a "$log"
}
piece gpu 75 --profile gpu --cuda-graphs --iters "$it"
piece demo 40 --profile demo --cuda-graphs --stages 3 --iters "$it"
piece paper-bf16 60 --profile paper --cuda-graphs --bf16 --stages 3 --iters $((it < 8 ? it : 8))
# what 8 style references (the demo's 4; the paper's 15) would cost the GPU profile's step
piece gpu-refs8 45 --profile gpu --cuda-graphs --stages 1,3 --iters "$it" --set model.style_refs=8

echo "=== summary" | tee -a "$log"
"$py" scripts/measure/gpu_profile_summary.py "$log" "$out/train/dsd/train_summary.json" \
    2>&1 | tee -a "$log"
