// One dispatch point: a runtime plan reaches each layer's scheme through with_scheme (Hana, over the
// closed list); a compile-time plan through for_each_layer (no runtime branch). Both must reach the
// very same template instantiation for every layer.
#include <typeinfo>
#include <vector>

#include "../../examples/models/deepseek_v3.hpp"
#include "equivalence.hpp"
#include "qpolicy/dispatch/dispatch.hpp"
#include "qpolicy/typed/for_each_layer.hpp"

namespace qp = qpolicy;

namespace {
// Stands for a kernel launch: one instantiation per scheme, identified by its address.
template <class Scheme>
const void* launch(const qp::layer_plan& layer) {
  (void)layer;
  return reinterpret_cast<const void*>(&launch<Scheme>);
}

using mixed_policy = qp::quant_config<qp::targets<qp::target<"re:.*mlp\\.experts$", qp::fp8_per_block>,
                                                  qp::target<"re:.*self_attn\\..*", qp::fp8_per_tensor>>>;
constexpr auto& compiled = qp::plan_for<mixed_policy, examples::deepseek_v3>;
}  // namespace

TEST_CASE("runtime dispatch and compile-time for_each_layer reach the same instantiations", "[compile-time][dispatch]") {
  std::vector<const void*> at_compile_time, at_run_time;
  std::vector<const std::type_info*> types;
  qp::for_each_layer<compiled>([&]<class Scheme>(const qp::layer_plan& layer, Scheme) {
    at_compile_time.push_back(launch<Scheme>(layer));
    types.push_back(&typeid(Scheme));
  });

  const auto model = qp::to_runtime(examples::deepseek_v3);
  qp::config_request request;
  request.quantization = "online";
  request.config_text = R"({"targets": {"re:.*mlp\\.experts$": "fp8_per_block", "re:.*self_attn\\..*": "fp8_per_tensor"}})";
  const auto runtime = qp::make_plan(qp::resolve(request).config, model);
  std::size_t i = 0;
  qp::for_each_layer(runtime, [&]<class Scheme>(const qp::layer_plan& layer, Scheme) {
    at_run_time.push_back(launch<Scheme>(layer));
    CHECK(*types[i++] == typeid(Scheme));
  });

  REQUIRE(at_compile_time.size() == model.layers.size());
  CHECK(at_compile_time == at_run_time);
  // Three schemes are in play, and each layer got the one its plan entry names.
  CHECK(at_compile_time[0] == reinterpret_cast<const void*>(&launch<qp::not_handled>));
  CHECK(at_compile_time[1] == reinterpret_cast<const void*>(&launch<qp::fp8_per_tensor>));
  CHECK(qp::layers_with<compiled, qp::method::fp8_per_block>.size() == 58);
  for (auto k : qp::layers_with<compiled, qp::method::fp8_per_block>)
    CHECK(at_run_time[k] == reinterpret_cast<const void*>(&launch<qp::fp8_per_block>));
}

TEST_CASE("with_scheme covers the closed list of methods", "[dispatch]") {
  for (int m = 0; m <= static_cast<int>(qp::method::nvfp4_per_token); ++m) {
    qp::method got = qp::method::none;
    qp::with_scheme(static_cast<qp::method>(m), [&](auto scheme) { got = decltype(scheme)::id; });
    CHECK(static_cast<int>(got) == m);
  }
  CHECK_THROWS_AS(qp::with_scheme(static_cast<qp::method>(42), [](auto) {}), std::invalid_argument);
}

TEST_CASE("model definitions agree with the shared model files", "[compile-time][models]") {
  // Also checked per case; here on its own so a model drift reads as such.
  CHECK(equivalence::model_file("deepseek-v3") == qp::to_runtime(examples::deepseek_v3));
}
