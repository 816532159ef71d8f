#!/usr/bin/env bash
# Create .venv and install the project into it. Idempotent; safe to rerun.
#   EXTRAS=dev   also install the test tools
#   TORCH_SPEC   what to install for torch (default torch==2.13.0: the CPU wheel on CPU machines;
#                on a GPU machine, e.g. TORCH_SPEC="torch==2.13.0 --index-url <your CUDA index>")
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
TORCH_SPEC="${TORCH_SPEC:-torch==2.13.0}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
. .venv/bin/activate
python -m pip install --quiet --upgrade pip
# torch first and pinned: an unpinned torch would pull several GB of CUDA packages.
if ! python -c "import torch" 2>/dev/null; then
  # shellcheck disable=SC2086
  python -m pip install --quiet $TORCH_SPEC
fi
TORCH_VERSION="$(python -c 'import torch; print(torch.__version__.split("+")[0])')"
echo "torch==${TORCH_VERSION}" > .venv/torch-constraint.txt
spec="."
if [ -n "${EXTRAS:-}" ]; then spec=".[${EXTRAS}]"; fi
python -m pip install --quiet -c .venv/torch-constraint.txt -e "$spec"
echo "setup: installed $(python -c 'import cashg; print("cashg", cashg.__version__)'), torch ${TORCH_VERSION}"
