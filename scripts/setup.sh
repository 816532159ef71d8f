#!/usr/bin/env bash
# Create .venv and install the project into it. Idempotent; safe to rerun.
#   EXTRAS=dev     also install the test tools
#   TORCH=auto     which build of the pinned torch: cpu (the small CPU-only wheel, from the
#                  torch project's CPU index), cuda (PyPI's default Linux wheel, which is the
#                  CUDA build), or auto (cuda where `nvidia-smi -L` finds a GPU, else cpu)
#   TORCH_SPEC     the whole pip argument list for torch instead (another CUDA version:
#                  TORCH_SPEC="torch==2.13.0 --index-url https://download.pytorch.org/whl/cu126")
#   TORCH_DRY_RUN=1  print the torch install command and stop
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
TORCH_VERSION_PIN=2.13.0
case "${TORCH:-auto}" in
  auto) if nvidia-smi -L >/dev/null 2>&1; then build=cuda; else build=cpu; fi ;;
  cpu|cuda) build=$TORCH ;;
  *) echo "setup: TORCH=${TORCH} is not one of auto, cpu, cuda" >&2; exit 2 ;;
esac
if [ -n "${TORCH_SPEC:-}" ]; then
  torch_args=$TORCH_SPEC
elif [ "$build" = cpu ]; then
  torch_args="torch==${TORCH_VERSION_PIN}+cpu --extra-index-url https://download.pytorch.org/whl/cpu"
else
  torch_args="torch==${TORCH_VERSION_PIN}"
fi
if [ "${TORCH_DRY_RUN:-0}" = 1 ]; then
  echo "pip install $torch_args"
  exit 0
fi
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
. .venv/bin/activate
python -m pip install --quiet --upgrade pip
# torch first and pinned: an unpinned torch would pull several GB of CUDA packages on a
# machine that has no GPU for them.
if ! python -c "import torch" 2>/dev/null; then
  echo "setup: installing torch (${TORCH_SPEC:+TORCH_SPEC}${TORCH_SPEC:-$build build}): pip install $torch_args"
  # shellcheck disable=SC2086
  python -m pip install --quiet $torch_args
fi
TORCH_VERSION="$(python -c 'import torch; print(torch.__version__.split("+")[0])')"
echo "torch==${TORCH_VERSION}" > .venv/torch-constraint.txt
spec="."
if [ -n "${EXTRAS:-}" ]; then spec=".[${EXTRAS}]"; fi
python -m pip install --quiet -c .venv/torch-constraint.txt -e "$spec"
echo "setup: installed $(python -c 'import cashg; print("cashg", cashg.__version__)'), torch $(python -c 'import torch; print(torch.__version__)')"
