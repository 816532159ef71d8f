#!/usr/bin/env bash
# Install into .venv and run the whole pipeline on the embedded demo corpus.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
snakemake --cores all "$@"
