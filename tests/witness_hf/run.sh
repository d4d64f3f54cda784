#!/usr/bin/env bash
# The witness-hf suite (run by run-tests.sh --full where installed: torch, transformers, compressed-tensors
# and llm-compressor take about 6 GB): skipped (77) until scripts/setup-witness-hf.sh has made .venv-hf.
root=$(cd "$(dirname "$0")/../.." && pwd)
py="$root/.venv-hf/bin/python3"
if ! [ -x "$py" ] || ! "$py" -c 'import torch, transformers, compressed_tensors, llmcompressor' 2>/dev/null; then
  echo "witness-hf: skipped: .venv-hf is missing (bash scripts/setup-witness-hf.sh makes it, about 6 GB)"
  exit 77
fi
"$py" "$root/tests/witness_hf/check_model_dirs.py" && exec "$py" "$root/tests/witness_hf/check_quantized_inputs.py"
