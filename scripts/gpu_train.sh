#!/usr/bin/env bash
# Train one experiment of the GPU profile (params.gpu.yaml) on one GPU, in one go: what a
# machine with a GPU does while the CPU machine keeps the rest of the pipeline
# (docs/training.md, "Training on a GPU machine").
#
#   bash scripts/gpu_train.sh [EXPERIMENT]        # default dsd; on the GPU machine, in a copy of
#                                                 # this checkout holding results/subsets/<benchmark>
# One call of the device tool runs at most ten minutes, set-up included: the script first
# measures this machine's step rate on the experiment's own data (stepped as the training
# loop steps them) and scales the schedule so that the measurement and the steps fill
# FIT_SHARE % of TRAIN_SECONDS (python -m cashg.training.fit_schedule: every iteration count
# alike, the curriculum keeps its shape; longer when the step is fast, shorter when it is slow,
# stage 1 at least STAGE1_FLOOR iterations), then trains with
# --deadline TRAIN_SECONDS - 30: should the steps still run late, the training stops there and
# writes model.pt from the weights so far (train_summary.json says where it stopped).
#
# Environment:
#   PARAMS=params.gpu.yaml   the profile          DEVICE=cuda (cpu: a smoke test of this script)
#   TRAIN_SECONDS=420        wall-clock budget of the training (fit + steps + evaluations);
#                            with the kill margin below, at most 9 minutes of the call
#   FIT_SHARE=75             per cent of it the fit and the steps are sized to (the rest: evaluations,
#                            checkpoints, sample pictures, start-up); FIT=0 keeps the schedule
#   STAGE1_FLOOR=3000        stage 1 (glyphs) keeps at least this many iterations when the
#                            schedule shrinks (letters appear after about 3,000 on the demo)
#   WORKERS=2                DataLoader processes that prepare the next batches
#   OUT=results/gpu_train    where the run goes ($OUT of the device tool: it comes back)
#   SET="train.x=1 ..."      extra --set overrides (a short schedule for the smoke test)
#   BF16=1                   bf16 autocast          PYTHON=python3
#
# Writes $OUT/train/<EXPERIMENT>/ (model.pt, train_summary.json, dvclive/, samples/,
# checkpoints/) and $OUT/gpu_train.log (nvidia-smi, versions, the training's own log, the
# wall time). Back on the CPU machine, put that folder at results/train/<EXPERIMENT>/ and let
# the pipeline generate, evaluate and report from it (docs/training.md gives the commands).
set -euo pipefail
exp=${1:-dsd}
params=${PARAMS:-params.gpu.yaml}
device=${DEVICE:-cuda}
limit=${TRAIN_SECONDS:-420}
out=${OUT:-results/gpu_train}
py=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} TOKENIZERS_PARALLELISM=false
mkdir -p "$out/train"
log=$out/gpu_train.log
: >"$log"
{
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 || true
    "$py" -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name()
if torch.cuda.is_available() else 'no GPU')"
    git log -1 --format='commit %H %s' 2>/dev/null || true
} | tee -a "$log"
# what the training imports must be on the machine (a lent GPU machine has no network)
missing=$("$py" -c "import importlib.util as u; print(' '.join(m for m in ('torch', 'numpy',
'h5py', 'yaml', 'transformers') if u.find_spec(m) is None))")
if [ -n "$missing" ]; then
    echo "gpu_train: $py lacks $missing: install them (scripts/setup.sh) first" | tee -a "$log"
    exit 2
fi
track=()
if ! "$py" -c "import dvclive" 2>/dev/null; then  # curves are a nicety, not a reason to stop
    echo "gpu_train: no dvclive here: training without curves (--no-track)" | tee -a "$log"
    track=(--no-track)
fi
sets=()
if ! "$py" -c "import matplotlib" 2>/dev/null; then  # the sample pictures need it
    echo "gpu_train: no matplotlib here: no sample pictures (train.sample_lines=0)" | tee -a "$log"
    sets+=(--set train.sample_lines=0)
fi
for s in ${SET:-}; do sets+=(--set "$s"); done
bf16=()
[ "${BF16:-0}" = 1 ] && bf16=(--bf16)
start=$(date +%s)
if [ "${FIT:-1}" = 1 ]; then
    steps=$((limit * ${FIT_SHARE:-75} / 100))
    fitted=$("$py" -m cashg.training.fit_schedule --experiment "$exp" --params "$params" \
        --device "$device" --seconds "$steps" --stage1-floor "${STAGE1_FLOOR:-3000}" \
        --workers "${WORKERS:-2}" "${bf16[@]}" "${sets[@]}" 2> >(tee -a "$log" >&2))
    for s in $fitted; do sets+=(--set "$s"); done
    echo "gpu_train: schedule for $steps s of measuring and steps: ${fitted:-unchanged (it fits)}" \
        | tr '\n' ' ' | tee -a "$log"; echo | tee -a "$log"
fi
left=$((limit - ($(date +%s) - start)))
flags=(--experiment "$exp" --params "$params" --out "$out/train/$exp" --device "$device"
       --no-progress --deadline "$((left > 60 ? left - 30 : 30))" --workers "${WORKERS:-2}"
       "${bf16[@]}" "${track[@]}")
set +e
timeout -s TERM -k 60 "$((left + 60))" "$py" -m cashg.training.stage "${flags[@]}" "${sets[@]}" \
    2>&1 | tee -a "$log"
rc=${PIPESTATUS[0]}
set -e
wall=$(($(date +%s) - start))
summary=$out/train/$exp/train_summary.json
if [ -f "$out/train/$exp/model.pt" ] && [ "$rc" = 0 ]; then
    how=$("$py" -c "import json, sys; s = json.load(open(sys.argv[1]));
print(s.get('stopped') or 'the whole schedule, ' + str(s['iterations']) + ' iterations')" "$summary")
    echo "gpu_train: $exp trained in $wall s on $device ($how): $out/train/$exp/model.pt" \
        | tee -a "$log"
else
    echo "gpu_train: $exp did not finish within $limit s (rc $rc, $wall s): the latest checkpoint" \
         "is in $out/train/$exp/checkpoints; rerun with a larger TRAIN_SECONDS to resume" \
        | tee -a "$log"
    exit 1
fi
