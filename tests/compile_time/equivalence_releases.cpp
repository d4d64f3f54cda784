// Every vLLM release through the compile-time front end: the release is a policy parameter, and the
// plan computed while compiling equals the runtime plan of the same arguments under that release --
// the conformance cases that differ between releases, and each rule of 0.34 that 0.30-0.33 lack.
#include "../../examples/models/llama_3_1_8b.hpp"
#include "../../examples/models/qwen3_30b_a3b.hpp"
#include "equivalence.hpp"

namespace qp = qpolicy;
using equivalence::check, equivalence::check_same;
using examples::llama_3_1_8b, examples::qwen3_30b_a3b;
using qp::target, qp::targets, qp::ignore;
using rel = qp::vllm_release;

TEST_CASE("0.30-0.33: the `or` merge and the dynamic MXFP8 key, at compile time", "[compile-time][releases]") {
  // An activation-only spec replaces the shorthand's linear slot: those layers stay unquantized.
  using activation_only = qp::quant_config<qp::linear_spec<qp::unset, qp::fp8_per_token>>;
  check<qp::policy<qp::fp8_per_block, activation_only, qp::vllm_0_30>, qwen3_30b_a3b>(
      "current/plan/qwen3-30b-a3b/activation_override_per_token@0.30");
  check<qp::policy<qp::fp8_per_block, activation_only, qp::vllm_0_32>, qwen3_30b_a3b>(
      "current/plan/qwen3-30b-a3b/activation_override_per_token@0.32");
  check_same<qp::policy<qp::fp8_per_block, activation_only, qp::vllm_0_31>, qwen3_30b_a3b>(
      "fp8_per_block", R"({"linear": {"activation": "fp8_per_token"}})", rel::v0_31, "qwen3-30b-a3b");
  // `-q mxfp8 -c ...` merges, with MXFP8 dynamic in both slots.
  check<qp::policy<qp::mxfp8, qp::quant_config<ignore<"lm_head">>, qp::vllm_0_30>, qwen3_30b_a3b>(
      "current/plan/qwen3-30b-a3b/mxfp8_with_ignore@0.30");
  check<qp::policy<qp::mxfp8, qp::quant_config<ignore<"lm_head">>, qp::vllm_0_32>, qwen3_30b_a3b>(
      "current/plan/qwen3-30b-a3b/mxfp8_with_ignore@0.32");
  // 0.32 names int4_per_group_32: a weight no online method takes, and no error.
  check_same<qp::policy<qp::online, qp::quant_config<qp::linear_spec<qp::fp8_per_channel>,
                                                     qp::moe_spec<qp::int4_per_group_32, qp::null>>, qp::vllm_0_32>,
             qwen3_30b_a3b>("online", R"({"linear": "fp8_per_channel", "moe": {"weight": "int4_per_group_32", "activation": null}})",
                            rel::v0_32, "qwen3-30b-a3b");
}

TEST_CASE("0.34: fields_set, rotations, spec targets and the new shorthands, at compile time", "[compile-time][releases]") {
  check<qp::fp8_per_block, llama_3_1_8b>("current/plan/llama-3.1-8b-instruct/shorthand_fp8_per_block");
  check_same<qp::mxfp4_hadamard32, llama_3_1_8b>("mxfp4_hadamard32", "null", rel::v0_34, "llama-3.1-8b-instruct");
  check_same<qp::policy<qp::mxfp4_hadamard32, qp::quant_config<qp::linear_spec<qp::unset, qp::unset, qp::hadamard<64>>>>,
             llama_3_1_8b>("mxfp4_hadamard32", R"({"linear": {"hadamard_size": 64}})", rel::v0_34, "llama-3.1-8b-instruct");
  // The merge keeps the shorthand's weight and takes the explicit null activation (MXFP4 accepts it).
  check_same<qp::policy<qp::mxfp4, qp::quant_config<qp::linear_spec<qp::mxfp4_static, qp::null>>>, llama_3_1_8b>(
      "mxfp4", R"({"linear": {"weight": "mxfp4", "activation": null}})", rel::v0_34, "llama-3.1-8b-instruct");
  check_same<qp::quant_config<targets<target<"re:.*down_proj", qp::spec<qp::mxfp4_static, qp::unset, qp::hadamard<32>>>,
                                      target<"re:.*experts", qp::lut_b_moe>,
                                      target<"re:.*o_proj", qp::spec<qp::fp8_per_channel_static>>>>,
             qwen3_30b_a3b>("online",
                            R"({"targets": {"re:.*down_proj": {"weight": "mxfp4", "hadamard_size": 32},)"
                            R"( "re:.*experts": "lut_b_moe", "re:.*o_proj": {"weight": "fp8_per_channel_static"}}})",
                            rel::v0_34, "qwen3-30b-a3b");
  check_same<qp::lut_b_moe, qwen3_30b_a3b>("lut_b_moe", "null", rel::v0_34, "qwen3-30b-a3b");
}
