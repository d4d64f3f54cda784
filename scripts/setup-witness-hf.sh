#!/usr/bin/env bash
# The opt-in Hugging Face witness (about 6 GB, never part of the product): torch, transformers,
# compressed-tensors and llm-compressor in their own virtual environment, .venv-hf/, for the
# `witness-hf` suite (tests/witness_hf/): qpolicy's model directories loaded by transformers and
# compressed-tensors, and compared with llm-compressor's output of the same model.
#   bash scripts/setup-witness-hf.sh && meson test -C build --suite witness-hf
# Skipped quietly when the environment is already there.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/.venv-hf"
check='import torch, transformers, compressed_tensors, llmcompressor, safetensors, numpy'
if [ -x "$venv/bin/python3" ] && "$venv/bin/python3" -c "$check" 2>/dev/null; then exit 0; fi
command -v python3 >/dev/null || { echo "setup-witness-hf: python3 is not installed" >&2; exit 1; }
python3 -m venv "$venv"
# Versions the issue measured against; llm-compressor pins its compressed-tensors.
"$venv/bin/pip" install -q --disable-pip-version-check torch transformers==5.17.0 llmcompressor==0.14.0.1 safetensors numpy
"$venv/bin/python3" -c "$check; print('witness-hf:', 'torch', torch.__version__, 'transformers', transformers.__version__, 'compressed-tensors', compressed_tensors.__version__, 'llmcompressor', llmcompressor.__version__)"
