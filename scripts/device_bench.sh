#!/usr/bin/env bash
# The GPU figures of issue 26 item 5 in one call of a lent machine (the device tool), in order
# of what matters most, each piece under its own time limit so a slow compile cannot eat the
# rest: eager demo stages 1-3, eager paper stage 3 (fp32, bf16, TF32), CUDA profiles of the
# eager steps (how busy the GPU is), the one-call style trunk (scripts/style_trunk_share.py),
# the compiled step's mutated inputs (scripts/compile_mutations.py), then the compiled step
# (COMPILE=0 leaves it out).
#
#   bash scripts/device_bench.sh [OUTDIR]      # $OUT on the device machine, else OUTDIR
#
# Runs under the machine's own python3 and torch (its CUDA build), with this checkout first on
# PYTHONPATH. Prints a summary table last; every piece's whole log goes to OUTDIR/bench.log.
#
# Side by side with an older commit in the same call (timings are only comparable on the same
# warm machine): export it into an ignored folder, carry that folder, name it in BEFORE:
#   echo /.prev/ >> .git/info/exclude; mkdir -p .prev; git archive COMMIT | tar -x -C .prev
#   device run: BEFORE=.prev bash scripts/device_bench.sh        (carry: [".prev"])
# BEFORE's own scripts/bench_train.py then times its eager demo and paper bf16 steps.
set -u
out=${OUT:-${1:-results/device_bench}}
mkdir -p "$out"
log=$out/bench.log
: >"$log"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} TOKENIZERS_PARALLELISM=false
py=${PYTHON:-python3}
start=$(date +%s)

deadline=${DEADLINE:-530}  # seconds for all pieces together: a piece gets at most what is left
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

b=scripts/bench_train.py
piece demo-eager 60 $b --profile demo --device $dev --iters 20 --no-reference
if [ "$last_rc" != 0 ]; then  # say which kernel fails: launches synchronous
    CUDA_LAUNCH_BLOCKING=1 piece demo-eager-blocking 60 $b --profile demo --device $dev \
        --stages 1 --iters 2 --no-reference
fi
if [ -n "${BEFORE:-}" ]; then  # the older commit, right after: the same machine, warm
    PYTHONPATH=$PWD/$BEFORE piece before-demo-eager 60 "$BEFORE/$b" --profile demo \
        --device $dev --iters 20 --no-reference
    PYTHONPATH=$PWD/$BEFORE piece before-paper-eager-bf16 60 "$BEFORE/$b" --profile paper \
        --device $dev --stages 3 --iters 8 --bf16 --no-reference
fi
piece paper-eager-fp32 60 $b --profile paper --device $dev --stages 3 --iters 8 --no-reference
piece paper-eager-bf16 60 $b --profile paper --device $dev --stages 3 --iters 8 --bf16 --no-reference
piece paper-eager-tf32 60 $b --profile paper --device $dev --stages 3 --iters 8 --tf32 --no-reference
piece paper-profile-bf16 70 scripts/profile_train.py --profile paper --device $dev --stages 3 \
    --iters 2 --rows 12 --bf16
piece demo-profile 50 scripts/profile_train.py --profile demo --device $dev --stages 3 \
    --iters 3 --rows 8 --phases
# the style trunk once per step with grouped BatchNorm (slower on a CPU core; fewer calls)
piece demo-trunk-share 100 scripts/style_trunk_share.py --device $dev --stages 3 --rounds 1
# which inputs the compiled step mutates (reduce-overhead skipped CUDA graphs over them)
piece compile-mutations 90 scripts/compile_mutations.py --device $dev --stage 3
if [ "${COMPILE:-1}" = 1 ]; then  # the compiled step: inductor needs minutes per graph here
    piece paper-compiled-bf16 300 $b --profile paper --device $dev --stages 3 --iters 8 \
        --bf16 --compile --no-reference
    piece demo-compiled-ro 200 $b --profile demo --device $dev --stages 3 --iters 20 \
        --compile --compile-mode reduce-overhead --no-reference
fi

echo "=== summary" | tee -a "$log"
grep -E "^=== |^profile |^stage |^round |^  compiled|^## stage|NOT STATIC|FELL BACK|Error|error:" "$log" \
    | grep -v "^=== summary" | tail -60
