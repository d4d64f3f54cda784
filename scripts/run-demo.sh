#!/usr/bin/env bash
# The main job for now: plan DeepSeek-V3 (bundled layer list) under -q fp8_per_block with the bundled
# deployment policy, and print the table, the summary and the warnings.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
exec build/qpolicy plan -q fp8_per_block -c @examples/deepseek_v3_policy.json --model examples/models/deepseek-v3.json "$@"
