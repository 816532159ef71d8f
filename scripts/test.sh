#!/usr/bin/env bash
# Install into .venv with the test tools, lint, and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
EXTRAS=dev bash scripts/setup.sh
. .venv/bin/activate
ruff check .
# The studio browser test drives a system Chromium with Playwright (Playwright's own browser
# download needs the internet). Install the Debian package when missing and we can; otherwise
# say loudly that the test will be skipped. Quiet and idempotent.
if [ -z "${CASHG_CHROMIUM:-}" ] && ! command -v chromium >/dev/null 2>&1 \
    && ! command -v chromium-browser >/dev/null 2>&1 && ! command -v google-chrome >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "test.sh: installing chromium (apt-get) for tests/test_studio_browser.py" >&2
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } \
      >/dev/null 2>&1 || echo "test.sh: WARNING: apt-get install chromium failed;" \
        "tests/test_studio_browser.py will be SKIPPED" >&2
  else
    echo "test.sh: WARNING: no Chromium found; tests/test_studio_browser.py will be SKIPPED" \
      "(install one: apt-get install -y chromium, or set CASHG_CHROMIUM=/path/to/chrome)" >&2
  fi
fi
python -m pytest -q -n 2 "$@"
