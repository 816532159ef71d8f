# One Snakemake rule per stage of dvc.yaml (see workflow/dag.py for the conventions).
# The command goes through params so that each rule keeps its own command (no late binding).
import sys
from pathlib import Path

sys.path.insert(0, workflow.basedir)
from cashg.core.params import load_params
from workflow.dag import load_stages, scheduling_priorities, stage_threads, threaded_cmd
from workflow.dag import dry_run_requested, dvc_record_pending
from workflow.dag import record_in_dvc_lock as record_stages_in_dvc_lock
from workflow.stale_lock import clear_stale_locks

# A params file whose benchmarks do not fit its datasets fails here, with the key named,
# before DVC's parser meets the unknown names (every stage checks it again when it runs).
_PARAMS = load_params(Path(workflow.basedir) / "params.yaml")
DVC_STAGES = load_stages(workflow.basedir)
_SHORT = {name for name, exp in _PARAMS["experiments"].items() if exp.budget == "short"}
_PRIORITY = scheduling_priorities(DVC_STAGES, _SHORT)
try:  # --cores N (a dry run may give none): the main training gets the cores the rest leaves
    _CORES = int(workflow.cores)
except Exception:  # noqa: BLE001 - snakemake's WorkflowError when no core count is given
    _CORES = 1
_THREADS = {s.name: stage_threads(s, _SHORT, _CORES) for s in DVC_STAGES}

# After a kill: a dead run's lock is cleared, and its record in dvc.lock, when the kill cut it
# short, is finished now (the run may have nothing else to do, and then runs no success
# hook). Only in the main Snakemake (not a cluster job's own) and with no other run alive.
if workflow.is_main_process and clear_stale_locks(workflow.basedir) is not None:
    if dvc_record_pending(workflow.basedir) and not dry_run_requested(sys.argv[1:]):
        print("A killed run left its record in dvc.lock unfinished: finishing it",
              file=sys.stderr)
        record_stages_in_dvc_lock(DVC_STAGES, workflow.basedir)


def _outputs(stage):
    return [directory(o.path) if o.is_dir else o.path for o in stage.snakemake_outputs]


for _stage in DVC_STAGES:

    rule:
        name:
            _stage.rule_name
        input:
            _stage.deps,
        output:
            _outputs(_stage),
        params:
            cmd=threaded_cmd(_stage, _THREADS[_stage.name]),
            tracked=_stage.params_json,
        log:
            _stage.log_path,
        benchmark:
            _stage.benchmark_path
        priority: _PRIORITY[_stage.name]
        threads: _THREADS[_stage.name]
        shell:
            "(export CASHG_TRAIN_THREADS={threads}; {params.cmd}) 2>&1 | tee {log}"


def all_stage_outputs():
    return [o.path for s in DVC_STAGES for o in s.snakemake_outputs]


def record_in_dvc_lock():
    """After a successful run, record finished stages in dvc.lock (see workflow/dag.py)."""
    import os

    if not os.environ.get("CASHG_NO_DVC_COMMIT"):
        record_stages_in_dvc_lock(DVC_STAGES, workflow.basedir)
