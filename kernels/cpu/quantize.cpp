// quantize<Formula> on the CPU, fast path and reference: one entry per formula row, over the FP8
// kernel families and the low-precision kernels. Instantiated for every formula of the registry.
#include <optional>
#include <utility>
#include <vector>

#include "qpolicy/kernels/cpu/block_quantizer.hpp"
#include "qpolicy/kernels/cpu/block_reference.hpp"
#include "qpolicy/kernels/cpu/reference.hpp"
#include "qpolicy/kernels/cpu/vectorized.hpp"
#include "qpolicy/schemes/registry.hpp"

namespace qpolicy::cpu {

namespace {

using schemes::formula;

/// Runs FP8 kernel Kernel with the options its formula takes: block options, group options or none.
template <class Kernel, class Threads>
void run_fp8(const input_view& x, const quantized_outputs& out, const quantize_options& o, std::int64_t group, Threads threads) {
  const fp8::block_options blocks{o.ue8m0, false};
  const fp8::group_options groups{group, o.ue8m0, o.layout};
  auto* s = static_cast<float*>(out.scales);
  if constexpr (requires { Kernel::run(x, blocks, out.codes, s, threads); }) Kernel::run(x, blocks, out.codes, s, threads);
  else if constexpr (requires { Kernel::run(x, groups, out.codes, s, threads); }) Kernel::run(x, groups, out.codes, s, threads);
  else Kernel::run(x, out.codes, s, threads);
}

/// The reference of low-precision formula F: codes and scales as the spec's functions write them
/// (block scales row-major), then the block scales placed in the requested layout.
template <formula F>
void reference_block_quantize(const input_view& x, const quantized_outputs& out, const quantize_options& o) {
  namespace ref = reference;
  constexpr auto& f = schemes::formula_of(F);
  const std::int64_t per_row = schemes::scales_per_row(f, x.cols);
  std::vector<std::uint8_t> blocks(static_cast<std::size_t>(f.block() ? x.rows * per_row : 0));
  if constexpr (F == formula::lut_b) {
    ref::lut_b(x, out.codes, out.codebook, static_cast<std::uint8_t*>(out.scales));
    return;
  } else if constexpr (f.transform == schemes::pre_transform::hadamard) {
    // The rotation (rounded to x's dtype), then the base formula's reference on the rotated values.
    std::vector<float> rotated(static_cast<std::size_t>(x.size()));
    ref::hadamard_rotate(x, o.transform_size ? o.transform_size : f.transform_size, rotated.data());
    reference_block_quantize<f.base>({rotated.data(), element::f32, x.rows, x.cols}, out, o);
    return;
  } else if constexpr (F == formula::mxfp8_torch) ref::mxfp8_torch(x, out.codes, blocks.data());
  else if constexpr (F == formula::mxfp8_flashinfer) ref::mxfp8_flashinfer(x, out.codes, blocks.data());
  else if constexpr (F == formula::mxfp4_even) ref::mxfp4_even(x, out.codes, blocks.data());
  else if constexpr (F == formula::mxfp4_rceil) ref::mxfp4_flashinfer(x, out.codes, blocks.data());
  else if constexpr (F == formula::int8_per_channel)
    ref::int8_per_channel(x, reinterpret_cast<std::int8_t*>(out.codes), static_cast<float*>(out.scales));
  else if constexpr (F == formula::nvfp4_weight)
    *out.second = ref::nvfp4_weight(x, out.codes, blocks.data(), o.has_amax ? &o.amax : nullptr).weight_scale_2;
  else {
    static_assert(F == formula::nvfp4_per_token, "reference_block_quantize has no reference for this formula: add its branch");
    ref::nvfp4_per_token(x, out.codes, blocks.data(), out.second);
  }
  auto* scales = static_cast<std::uint8_t*>(out.scales);
  for (std::int64_t r = 0; r < x.rows && f.block(); ++r)
    for (std::int64_t j = 0; j < per_row; ++j)
      scales[lp::block_scale_offset(r, j, per_row, o.swizzled)] = blocks[static_cast<std::size_t>(r * per_row + j)];
}

}  // namespace

template <class Formula>
void quantize(const input_view& x, const quantized_outputs& out, const quantize_options& o, const cpu_options& co) {
  constexpr auto& f = schemes::formula_of(Formula::id);
  if constexpr (f.low_precision()) {
    block_quantizer<Formula>::run(x, out, o, co);
  } else if constexpr (Formula::id == formula::fp8_per_tensor_static) {
    if (o.has_amax) weight_kernel<fp8_per_tensor>::run_with_amax(x, o.amax, out.codes, static_cast<float*>(out.scales), co);
    else weight_kernel<fp8_per_tensor>::run(x, out.codes, static_cast<float*>(out.scales), co);
  } else {
    run_fp8<schemes::fp8_kernel_of<weight_kernel, activation_kernel, Formula>>(x, out, o, f.group.col, co);
  }
}

template <class Formula>
void reference::quantize(const input_view& x, const quantized_outputs& out, const quantize_options& o) {
  constexpr auto& f = schemes::formula_of(Formula::id);
  if constexpr (f.low_precision()) {
    reference_block_quantize<Formula::id>(x, out, o);
  } else if constexpr (Formula::id == formula::fp8_per_tensor_static) {
    if (o.has_amax) weight_per_tensor_with_amax(x, o.amax, out.codes, static_cast<float*>(out.scales));
    else weight_per_tensor(x, out.codes, static_cast<float*>(out.scales));
  } else {
    run_fp8<schemes::fp8_kernel_of<weight_kernel, activation_kernel, Formula>>(x, out, o, f.group.col, no_threads{});
  }
}

// Every formula of the registry, both paths: an external table odr-uses each instantiation.
namespace detail {
const void* quantize_table() {
  static const auto table = registry::table_of(registry::formula_types, [](auto tag) {
    using tag_t = decltype(tag);
    return std::pair{&quantize<tag_t>, &reference::quantize<tag_t>};
  });
  return &table;
}
}  // namespace detail

}  // namespace qpolicy::cpu
