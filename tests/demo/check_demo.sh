#!/usr/bin/env bash
# The README's main job: qpolicy-demo runs, its JSON path finds the plan identical, a different JSON
# policy is reported as different (and still runs), and bad arguments get a clear message and exit 2.
set -uo pipefail
demo=$1 policy=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
check() {  # description, expected exit, expected text, command...
  local what=$1 want_rc=$2 want_text=$3
  shift 3
  "$@" >"$work/out" 2>&1
  local rc=$?
  if [ "$rc" != "$want_rc" ] || ! grep -qF -- "$want_text" "$work/out"; then
    echo "FAIL: $what (exit $rc, wanted $want_rc and '$want_text'):"
    cat "$work/out"
    fail=1
  else
    echo "ok: $what"
  fi
}
check "compile-time plan and forward pass" 0 "fp8_per_block" "$demo" --tokens 16 --threads 2
check "every layer kind is reported" 0 "mlp.experts          fp8_per_tensor" "$demo" --tokens 8
for scheme in "self_attn.qkv_proj   mxfp8" "self_attn.o_proj     mxfp4" "mlp.experts          mxfp4" \
    "mlp.experts          nvfp4_per_token" "mlp.experts          int8_per_channel_weight_only" \
    "self_attn.o_proj     mxfp4 + Hadamard 32" "mlp.experts          lut_b_moe"; do
  check "the nine shorthands run: $scheme" 0 "$scheme" "$demo" --tokens 8
done
check "the Hadamard layers say what they run" 0 "note: mxfp4 linear layers with a Hadamard-rotated input rotate it" "$demo" --tokens 8
check "the LUT-B MoE says it is an emulation" 0 "note: lut_b_moe experts run emulation of LUT-B MoE" "$demo" --tokens 8
check "the MXFP4 MoE says it is an emulation" 0 "note: mxfp4 experts run emulation" "$demo" --tokens 8
check "the NVFP4 MoE says it emulates Blackwell" 0 "note: nvfp4_per_token experts run emulation of Blackwell" "$demo" --tokens 8
check "JSON path gives the identical plan" 0 "identical to the compile-time plan, layer by layer" \
  "$demo" --config "$policy" --tokens 16
echo '{"linear": {"weight": "fp8_per_block_static"}}' >"$work/other.json"
check "a different JSON policy is reported" 0 "differs from the compile-time plan in" "$demo" --config "$work/other.json" --tokens 8
echo '{"linear": {"weight": "fp8_per_block_static"}, "targets": {"x": "fp8_per_block"}}' >"$work/bad.json"
check "a bad JSON policy is refused with vLLM's message" 1 "qpolicy-demo:" "$demo" --config "$work/bad.json"
check "an unknown flag" 2 "qpolicy-demo: unknown argument '--bogus'" "$demo" --bogus
check "a bad token count" 2 "--tokens takes a whole number from 1 to 65536, got 'many'" "$demo" --tokens many
check "a missing config file" 1 "cannot read config file '$work/none.json'" "$demo" --config "$work/none.json"
check "a bad device name" 2 "--device takes auto, cpu or cuda, got 'tpu'" "$demo" --device tpu
check "the CPU when asked" 0 "kernels: CPU" "$demo" --device cpu --tokens 8
exit $fail
