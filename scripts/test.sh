#!/usr/bin/env bash
# Install into .venv with the test tools, lint, and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
EXTRAS=dev bash scripts/setup.sh
. .venv/bin/activate
ruff check .
python -m pytest -q -n 2 "$@"
