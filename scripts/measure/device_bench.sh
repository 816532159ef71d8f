#!/usr/bin/env bash
# The GPU step's figures in one go on a GPU machine, most important first, each piece under
# its own time limit so that one slow
# piece cannot eat the rest: the replayed step against eager (agreement, then demo stages 1-3
# eager, replayed and padded without replay, and paper stage 3 in bf16 and fp32, side by
# side), the padded step's kernels (the largest kernel's share of the GPU time), samples per
# second against batch size; COMPILE=1 adds the
# compiled step (capture against compile time). The training itself and the goals:
# scripts/gpu_check.sh.
#
#   bash scripts/measure/device_bench.sh [OUTDIR]      # $OUT on the device machine, else OUTDIR
#
# Runs under the machine's own python3 and torch (its CUDA build), with this checkout first on
# PYTHONPATH. Prints a summary table last; every piece's whole log goes to OUTDIR/bench.log.
# DEVICE=cpu: a smoke test of this script where there is no GPU (the graphs then fall back to
# eager with a warning, which the summary shows).
#
# Side by side with an older commit in the same call (timings are only comparable on the same
# warm machine): export it into an ignored folder, carry that folder, name it in BEFORE:
#   echo /.prev/ >> .git/info/exclude; mkdir -p .prev; git archive COMMIT | tar -x -C .prev
#   device run: BEFORE=.prev bash scripts/measure/device_bench.sh        (carry: [".prev"])
# BEFORE's own bench_train.py then times its eager demo and paper bf16 steps.
set -u
out=${OUT:-${1:-results/device_bench}}
mkdir -p "$out"
log=$out/bench.log
: >"$log"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} TOKENIZERS_PARALLELISM=false
py=${PYTHON:-python3}
start=$(date +%s)

deadline=${DEADLINE:-330}  # seconds for all pieces together: a piece gets at most what is left
dev=${DEVICE:-cuda}        # DEVICE=cpu: a smoke test of this script where there is no GPU
last_rc=0

piece() {  # piece NAME SECONDS SCRIPT ARGS...: one timed piece, appended to the log
    local name=$1 limit=$2 left
    shift 2
    left=$((deadline - ($(date +%s) - start)))
    ((left < limit)) && limit=$left
    if ((limit < 20)); then
        echo "=== $name skipped: the deadline is reached" | tee -a "$log"
        last_rc=skipped
        return
    fi
    echo "=== $name (t+$(($(date +%s) - start)) s, limit $limit s): $*" | tee -a "$log"
    timeout "$limit" "$py" "$@" >>"$log" 2>&1
    last_rc=$?
    echo "=== $name rc=$last_rc (t+$(($(date +%s) - start)) s)" | tee -a "$log"
}

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv 2>&1 | tee -a "$log"
"$py" -c "import torch, transformers; print('torch', torch.__version__, 'transformers',
transformers.__version__, torch.cuda.get_device_name() if torch.cuda.is_available() else 'no GPU')" \
    2>&1 | tee -a "$log"

m=scripts/measure
b=$m/bench_train.py
it=${ITERS:-20}  # timed iterations per stage (DEVICE=cpu smoke tests: ITERS=2)
piece graphed-agreement 90 $m/graphed_agreement.py --device $dev --steps 3
piece demo-eager 60 $b --profile demo --device $dev --iters $it --no-reference
if [ "$last_rc" != 0 ]; then  # say which kernel fails: launches synchronous
    CUDA_LAUNCH_BLOCKING=1 piece demo-eager-blocking 60 $b --profile demo --device $dev \
        --stages 1 --iters 2 --no-reference
fi
piece demo-graphed 90 $b --profile demo --device $dev --iters $it --cuda-graphs --no-reference
piece demo-padded 60 $b --profile demo --device $dev --iters $it --static-shapes --no-reference
if [ -n "${BEFORE:-}" ]; then  # the older commit, right after: the same machine, warm
    PYTHONPATH=$PWD/$BEFORE piece before-demo-eager 60 "$BEFORE/$b" --profile demo \
        --device $dev --iters $it --no-reference
fi
pit=$(( it < 8 ? it : 8 ))
piece paper-eager-bf16 60 $b --profile paper --device $dev --stages 3 --iters $pit --bf16 --no-reference
piece paper-graphed-bf16 90 $b --profile paper --device $dev --stages 3 --iters $pit --bf16 \
    --cuda-graphs --no-reference
piece paper-eager-fp32 60 $b --profile paper --device $dev --stages 3 --iters $pit --no-reference
piece paper-graphed-fp32 90 $b --profile paper --device $dev --stages 3 --iters $pit \
    --cuda-graphs --no-reference
piece paper-profile-bf16-padded 70 $m/profile_train.py --profile paper --device $dev --stages 3 \
    --iters 2 --rows 12 --bf16 --static-shapes
piece batch-sweep-graphed 120 $m/batch_sweep.py --device $dev --stages 1,3 --iters 8 --cuda-graphs
if [ "${COMPILE:-0}" = 1 ]; then  # inductor needs minutes per graph: capture against compile
    piece demo-compiled-ro 200 $b --profile demo --device $dev --stages 3 --iters $it \
        --compile --compile-mode reduce-overhead --no-reference
fi

echo "=== summary" | tee -a "$log"
grep -E "^=== |^profile |^stage |^[13] \| |^  compiled|^  pipelined|^  graphed|^## stage|^weights|^agreement|^graphs:|^gpu_train:|NOT STATIC|FELL BACK|Error|error:" "$log" \
    | grep -v "^=== summary" | tail -60
