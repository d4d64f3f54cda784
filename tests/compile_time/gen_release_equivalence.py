#!/usr/bin/env python3
"""Writes C++ tests that run every plan case of vllm_release_cases.json whose config is expressible as
policy types through the compile-time front end, and compare it with the runtime front end.

usage: gen_release_equivalence.py CASES.json PART COUNT OUT.cpp

Each case becomes a policy type (quantization tag, quant_config<...>, vllm_0_XX) and a model
definition (its layers, as qp::linear / qp::moe / qp::other). A plan that succeeds is computed while
compiling (plan_for) and must equal the runtime plan; a case that fails must fail with the same first
error in the compile-time planner (run here at run time, so that one file holds them all). Cases whose
config types cannot say (a non-string key name, a number where a name goes, a pattern with characters
a fixed_string template argument cannot hold) are counted and listed in a comment.
"""
import json
import sys

KEY_TAGS = {
    "fp8_per_tensor_static": "fp8_per_tensor_static", "fp8_per_tensor_dynamic": "fp8_per_tensor_dynamic",
    "fp8_per_token": "fp8_per_token", "fp8_per_channel_static": "fp8_per_channel_static",
    "fp8_per_block_static": "fp8_per_block_static", "fp8_per_block_dynamic": "fp8_per_block_dynamic",
    "mxfp8": "mxfp8_dynamic", "mxfp4": "mxfp4_dynamic", "int8_per_channel_static": "int8_per_channel_static",
    "nvfp4_per_token": "nvfp4_per_token_dynamic", "int8_per_group_32": "int8_per_group_32",
    "int4_per_group_32": "int4_per_group_32", "lut_b": "lut_b",
}
SHORTHAND_TAGS = {n: n for n in ["fp8_per_tensor", "fp8_per_block", "fp8_per_channel", "mxfp8", "mxfp4", "mxfp4_hadamard32",
                                 "int8_per_channel_weight_only", "nvfp4_per_token", "lut_b_moe"]}


class Inexpressible(Exception):
    pass


def literal(text):
    """A C++ string literal for a fixed_string argument (printable ASCII only)."""
    if not isinstance(text, str) or any(not (0x20 <= ord(c) < 0x7F) for c in text):
        raise Inexpressible("a string with characters outside printable ASCII")
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def name_tag(name):
    """A tag whose name is `name`: a shorthand's (the string form) or a key's."""
    if not isinstance(name, str):
        raise Inexpressible("a name that is not a string")
    if name in SHORTHAND_TAGS:
        return "qp::" + SHORTHAND_TAGS[name]
    if name in KEY_TAGS:
        return "qp::" + KEY_TAGS[name]
    raise Inexpressible(f"the name {name!r} has no tag")


def key_tag(value):
    if value is None:
        return "qp::null"
    if not isinstance(value, str) or value not in KEY_TAGS:
        raise Inexpressible("a spec field that is not a key name or null")
    return "qp::" + KEY_TAGS[value]


def spec_args(obj):
    if not isinstance(obj, dict) or set(obj) - {"weight", "activation", "hadamard_size"}:
        raise Inexpressible("a spec with other fields")
    w = key_tag(obj["weight"]) if "weight" in obj else "qp::unset"
    a = key_tag(obj["activation"]) if "activation" in obj else "qp::unset"
    h = "qp::no_hadamard"
    if "hadamard_size" in obj:
        n = obj["hadamard_size"]
        if n is None:
            pass
        elif isinstance(n, int) and not isinstance(n, bool) and abs(n) < 2 ** 62:
            h = f"qp::hadamard<{n}>"
        else:
            raise Inexpressible("a hadamard_size that is not an integer")
    return f"{w}, {a}, {h}"


def slot(field, value):
    if value is None:
        return None
    if isinstance(value, str):
        if value in SHORTHAND_TAGS:
            return f"qp::{field}_spec<{name_tag(value)}>"
        return f"qp::{field}_spec<{key_tag(value)}>"
    return f"qp::{field}_spec<{spec_args(value)}>"


def config_type(cfg):
    if cfg is None:
        return "void"
    if not isinstance(cfg, dict) or set(cfg) - {"linear", "moe", "ignore", "targets"}:
        raise Inexpressible("a config that is not an object of the four fields")
    parts = []
    for field in ("linear", "moe"):
        s = slot(field, cfg.get(field))
        if s:
            parts.append(s)
    if "ignore" in cfg:
        if not isinstance(cfg["ignore"], list):
            raise Inexpressible("ignore that is not a list")
        parts.append("qp::ignore<" + ", ".join(literal(p) for p in cfg["ignore"]) + ">")
    if cfg.get("targets") is not None:
        t = cfg["targets"]
        if not isinstance(t, dict):
            raise Inexpressible("targets that is not an object")
        entries = []
        for pattern, value in t.items():
            v = name_tag(value) if isinstance(value, str) else f"qp::spec<{spec_args(value)}>"
            entries.append(f"qp::target<{literal(pattern)}, {v}>")
        parts.append("qp::targets<" + ", ".join(entries) + ">")
    return "qp::quant_config<" + ", ".join(parts) + ">"


def quantization_tag(q):
    if q is None or q == "online":
        return "qp::online"
    if q in SHORTHAND_TAGS:
        return name_tag(q)
    return f"qp::checkpoint<{literal(q)}>"


def layer_expr(layer):
    kind = layer["kind"]
    name, cls = literal(layer["name"]), literal(layer["class"])
    if kind == "moe":
        e = f"qp::moe({name}, {cls}, {layer.get('num_experts', 0)}, {layer.get('hidden_size', 0)}, " \
            f"{layer.get('intermediate_size', 0)})"
    else:
        shape = layer.get("shape", [0, 0])
        e = f"qp::{'linear' if kind == 'linear' else 'other'}({name}, {cls}, {{{shape[0]}, {shape[1]}}})"
        if layer.get("shard_sizes"):
            e += ".with_shards({" + ", ".join(str(s) for s in layer["shard_sizes"]) + "})"
    if "bias" in layer:
        e += f".with_bias({'true' if layer['bias'] else 'false'})"
    if layer.get("quantizable") is False:
        e += ".not_quantizable()"
    return e


def model_expr(model):
    parts = [literal(model.get("name", "model"))]
    for fused, shards in model.get("packed_modules_mapping", {}).items():
        if not shards or len(shards) > 8:
            raise Inexpressible("a packed entry the model definition cannot hold")
        parts.append(f"qp::packed({literal(fused)}, {{" + ", ".join(literal(s) for s in shards) + "})")
    parts += [layer_expr(l) for l in model["layers"]]
    return "qp::model(" + ",\n    ".join(parts) + ")"


def main():
    cases_path, part, count, out_path = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    cases = [c for c in json.load(open(cases_path))["cases"] if c["command"] == "plan" and c["schema"] == "current"]
    models, body, skipped = {}, [], []
    for index, case in enumerate(cases):
        if index % count != part:
            continue
        try:
            policy = (f"qp::policy<{quantization_tag(case.get('quantization'))}, {config_type(case.get('config'))}, "
                      f"qp::vllm_{case['vllm'].replace('.', '_')}>")
            model = model_expr(case["model"])
        except Inexpressible as why:
            skipped.append(f"{case['id']}: {why}")
            continue
        key = json.dumps(case["model"], sort_keys=True)
        if key not in models:
            models[key] = (f"model_{len(models)}", model)
        model_name = models[key][0]
        succeeds = case["expect"]["exit"] == 0
        check = "check_success" if succeeds else "check_failure"
        body.append(f"  {check}<{policy}, {model_name}>({literal(case['id'])});")
    with open(out_path, "w") as f:
        f.write("// Generated by tests/compile_time/gen_release_equivalence.py from vllm_release_cases.json: do not edit.\n")
        f.write('#include "release_equivalence.hpp"\n\nnamespace {\nnamespace qp = qpolicy;\n')
        for name, expr in models.values():
            f.write(f"inline constexpr auto {name} = {expr};\n")
        f.write("}  // namespace\n\n")
        f.write(f"// {len(body)} cases here; not expressible as types ({len(skipped)}):\n")
        for s in skipped:
            f.write(f"//   {s}\n")
        f.write(f'TEST_CASE("release plan cases through the compile-time front end, part {part} of {count}", '
                f'"[compile-time][releases]") {{\n  using release_equivalence::check_success, release_equivalence::check_failure;\n')
        f.write("\n".join(body) + "\n}\n")


main()
