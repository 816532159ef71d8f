#!/usr/bin/env bash
# The GPU check: every GPU code path, run on one GPU in at most nine minutes (imports and the
# first captures included), with a table against the goals at the end.
#
#   bash scripts/gpu_check.sh [OUTDIR]         # needs results/subsets/dsd (snakemake --cores
#                                              # all subsets__dsd builds it on any machine)
#
#   1. tests   the graphed-step and host-plan tests (their CUDA cases run where CUDA is)
#   2. agree   the graph-agreement check: replayed and eager steps, side by side
#   3. train   the pipeline's own train stage for dsd at the GPU profile (params.yaml with
#              `cashg params profile gpu` over it), under a time budget (train.seconds =
#              TRAIN_SECONDS): every curriculum stage reached; its model.pt can be scored
#   4. bench   the step benchmarks: the GPU profile's stages 1-3 and the demo's stage 3,
#              replayed; the paper profile's stage 3, replayed in bf16
#   5. summary scripts/gpu_check_summary.py: each figure beside its goal
#
# Each piece runs under its own limit inside the whole check's nine minutes, so one slow
# piece cannot eat the rest. DEVICE=cpu smoke-tests the script without a GPU (the graphs then
# fall back to eager, which the summary flags); the suite runs it so, tiny (tests/
# test_gpu_check.py). Environment: DEVICE (cuda), TRAIN_SECONDS (200), ITERS (20 timed
# iterations per stage), SET and BENCH_SET ("SECTION.KEY=VALUE ..." for the train stage and
# for the benchmarks), CHECK_SECONDS (540), PYTHON, OUT.
# Writes OUTDIR (default results/gpu_check): check.log (everything), params.yaml (the
# profile used), train/dsd/ (model.pt, train_summary.json, checkpoints).
set -u
out=${OUT:-${1:-results/gpu_check}}
mkdir -p "$out"
log=$out/check.log
: >"$log"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} TOKENIZERS_PARALLELISM=false
py=${PYTHON:-python3}
dev=${DEVICE:-cuda}
it=${ITERS:-20}
budget=${TRAIN_SECONDS:-200}
start=$(date +%s)
whole=${CHECK_SECONDS:-540}  # nine minutes for everything

piece() {  # piece NAME SECONDS COMMAND...: one piece, under what is left of the nine minutes
    local name=$1 limit=$2 left rc
    shift 2
    left=$((whole - ($(date +%s) - start)))
    ((left < limit)) && limit=$left
    if ((limit < 10)); then
        echo "=== $name skipped: the nine minutes are spent" | tee -a "$log"
        return
    fi
    echo "=== $name (t+$(($(date +%s) - start)) s, limit $limit s): $*" | tee -a "$log"
    timeout -k 10 "$limit" "$@" >>"$log" 2>&1
    rc=$?
    echo "=== $name rc=$rc (t+$(($(date +%s) - start)) s)" | tee -a "$log"
}

{
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 || true
    "$py" -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name()
if torch.cuda.is_available() else 'no GPU')"
    git log -1 --format='commit %H' 2>/dev/null || true
} | tee -a "$log"
if [ ! -d results/subsets/dsd ]; then
    echo "gpu_check: results/subsets/dsd is missing: snakemake --cores all subsets__dsd" | tee -a "$log"
    exit 2
fi

piece tests 120 "$py" -m pytest -q -p no:cacheprovider tests/test_graphed_step.py tests/test_host_plan.py
piece agree 90 "$py" scripts/measure/graphed_agreement.py --device "$dev" --steps 3

"$py" -c "import sys; from pathlib import Path; from cashg.core.profiles import apply_profile
Path(sys.argv[2]).write_text(apply_profile(Path('params.yaml').read_text(),
                                           Path(sys.argv[1]).read_text()))" \
    params.profiles/gpu.yaml "$out/params.yaml"
sets=(--set "train.seconds=$budget" --set "train.device=$dev")
for s in ${SET:-}; do sets+=(--set "$s"); done
rm -rf "$out/train/dsd"
piece train $((budget + 90)) "$py" -m cashg.training.stage --experiment dsd --params "$out/params.yaml" \
    --out "$out/train/dsd" --no-progress --no-track "${sets[@]}"

b=(scripts/measure/bench_train.py --device "$dev" --cuda-graphs --no-reference)
for s in ${BENCH_SET:-}; do b+=(--set "$s"); done
piece bench-gpu 75 "$py" "${b[@]}" --profile gpu --iters "$it"
piece bench-demo 40 "$py" "${b[@]}" --profile demo --stages 3 --iters "$it"
piece bench-paper-bf16 60 "$py" "${b[@]}" --profile paper --bf16 --stages 3 --iters $((it < 8 ? it : 8))

echo "=== summary" | tee -a "$log"
"$py" scripts/gpu_check_summary.py "$log" "$out/train/dsd/train_summary.json" 2>&1 | tee -a "$log"
