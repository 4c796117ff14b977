#!/usr/bin/env bash
# Install everything into .venv (fresh machine OK) and run the whole check:
# formatting, lint, strict typing, the protocol schema check, and the test suite.
# The first run builds llama-cpp-python from source (about 7 minutes on 2 cores);
# pip caches the wheel, so later runs take seconds to install.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[local,test]'
export PATH="$PWD/.venv/bin:$PATH"
echo "== ruff format --check"; ruff format --check jpd clients tests bench
echo "== ruff check"; ruff check jpd clients tests bench
echo "== mypy --strict"; mypy jpd clients/jpcli
echo "== import layers"; lint-imports
echo "== protocol schemas"; python -m jpd.schemas --check
echo "== pytest"; python -m pytest "$@"
