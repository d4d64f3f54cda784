// nvcc: a compile-time plan computed by nvcc's front end, and one __global__ instantiation per scheme
// the plan uses, chosen by for_each_layer with no runtime branch. Includes only the tag and plan
// headers (no Hana, fmt or JSON). Compiling is most of the test; with a GPU the kernels also run.
#include <cstdio>
#include <cuda_runtime.h>

#include "../../examples/models/qwen2_5_0_5b.hpp"
#include "qpolicy/typed/for_each_layer.hpp"

namespace qp = qpolicy;

using policy = qp::policy<qp::fp8_per_tensor,
                          qp::quant_config<qp::linear_spec<qp::fp8_per_block>, qp::ignore<"re:.*\\.o_proj$", "lm_head">>>;
constexpr auto& plan = qp::plan_for<policy, examples::qwen2_5_0_5b>;
static_assert(plan["model.layers.0.self_attn.o_proj"].decided == qp::method::unquantized);
static_assert(plan["model.layers.23.mlp.down_proj"].decided == qp::method::fp8_per_block);
static_assert(plan.count(qp::method::fp8_per_block) == 72);

// A fused layer with shard sizes: the model rules (the shard sum, checked arithmetic) run in nvcc's
// constant evaluation too.
constexpr auto fused_model = qp::model(
    qp::packed("qkv_proj", {"q_proj", "k_proj", "v_proj"}),
    qp::linear("model.layers.0.self_attn.qkv_proj", "QKVParallelLinear", {1536, 1024}).with_shards({1024, 256, 256}));
constexpr auto& fused_plan = qp::plan_for<qp::fp8_per_block, fused_model>;
static_assert(fused_plan["model.layers.0.self_attn.qkv_proj"].decided == qp::method::fp8_per_block);

// A kernel per scheme, templated on the tag type (class-type NTTPs do not build here): it writes the
// method id its scheme carries, so a launch shows which instantiation ran.
template <class Scheme>
__global__ void layer_kernel(int* out, int layer) {
  out[layer] = static_cast<int>(Scheme::id);
}

int main() {
  constexpr int layers = static_cast<int>(plan.size());
  const void* kernels[layers] = {};
  int expected[layers] = {};
  int i = 0;
  qp::for_each_layer<plan>([&]<class Scheme>(const qp::layer_plan& layer, Scheme) {
    kernels[i] = reinterpret_cast<const void*>(&layer_kernel<Scheme>);
    expected[i] = static_cast<int>(layer.decided);
    ++i;
  });
  int failures = 0;
  // Same method, same instantiation; different methods, different instantiations.
  for (int k = 0; k < layers; ++k)
    for (int j = 0; j < layers; ++j) failures += (expected[k] == expected[j]) != (kernels[k] == kernels[j]);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("%d layers bound to their kernels at compile time; no GPU, so none launched\n", layers);
    return failures == 0 ? 0 : 1;
  }
  int* out = nullptr;
  if (cudaMalloc(&out, sizeof(int) * layers) != cudaSuccess) return 1;
  i = 0;
  qp::for_each_layer<plan>([&]<class Scheme>(const qp::layer_plan&, Scheme) { layer_kernel<Scheme><<<1, 1>>>(out, i++); });
  int got[layers] = {};
  if (cudaMemcpy(got, out, sizeof(int) * layers, cudaMemcpyDeviceToHost) != cudaSuccess) return 1;
  cudaFree(out);
  for (int k = 0; k < layers; ++k) failures += got[k] != expected[k];
  std::printf("%d layers launched on the GPU, %d mismatches\n", layers, failures);
  return failures == 0 ? 0 : 1;
}
