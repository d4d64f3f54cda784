#!/usr/bin/env python3
"""The witness-hf suite: qpolicy's output model directories against the Hugging Face stack.

Run by tests/witness_hf/run.sh in .venv-hf (scripts/setup-witness-hf.sh). For tiny random models made
here (a Llama and a Qwen3-MoE, bf16), each FP8 scheme and format:
  1. every tensor of the output has the name, dtype and shape vLLM's create_weights registers for it
     (the table below), and nothing else is there;
  2. transformers' AutoModelForCausalLM.from_pretrained loads the directory on CPU with no missing,
     unexpected or mismatched tensors, and every dequantized weight is within FP8's bound of the
     original (a scale read as 1, or not read, fails by orders of magnitude); everything else is equal;
  3. compressed-tensors output validates as compressed-tensors' QuantizationConfig and decompresses
     through ModelCompressor.from_compression_config(...).decompress_model (transformers' loader);
  4. llm-compressor's FP8_BLOCK output of the same model has the same tensors and quantization_config;
     its scales are qpolicy's rounded to bf16, and its codes differ by at most one step where its
     rounded scale moves a value across a rounding boundary (printed as numbers).
  5. The low-precision schemes (mxfp8, mxfp4, int8_per_channel_weight_only, nvfp4_per_token): the same
     tensors (names, dtypes, shapes) and config group (format, weights, input_activations) as
     llm-compressor's MXFP8, MXFP4, W8A16-per-channel and NVFP4A16 output of the same layers;
     compressed-tensors' own decompressors turn qpolicy's tensors into weights within the format's
     bound of the original, block by block; transformers loads the ones it can (it cannot load
     llm-compressor's MoE MXFP8 or NVFP4 output either); how many codes and scales equal
     llm-compressor's is printed.
  6. Rotated MXFP4 (-q mxfp4_hadamard32): the same tensors and quantization_config as llm-compressor's
     QuIPModifier(rotations=["v"], transform_type="hadamard", transform_block_size=32) + MXFP4 output,
     except the transform's precision (qpolicy's rotation is float32, as vLLM 0.34's; llm-compressor
     fuses in float64) and so the transform weight's dtype; the transform weight is the Sylvester
     matrix; compressed-tensors decompresses every weight to within MXFP4's bound of the original
     rotated by 32-blocks of the normalized matrix (in float64 here), and the layer vLLM runs,
     (x H)(W_dec)^T, is close to x W^T.
Prints one line per check and exits 1 on the first failure.
"""
import json
import math
import os
import re
import subprocess
import sys
import tempfile

import torch
from safetensors import safe_open

EXE = os.environ["QPOLICY_EXE"]
LINEAR = re.compile(r"\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj|gate_up_proj)(\.|$)")


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def make_models(root):
    """A dense Llama and a Qwen3-MoE, 2 layers, hidden 256, random bf16 weights."""
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen3MoeConfig, Qwen3MoeForCausalLM

    torch.manual_seed(0)
    common = dict(vocab_size=512, hidden_size=256, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                  head_dim=64, tie_word_embeddings=False)
    models = {
        "llama": LlamaForCausalLM(LlamaConfig(intermediate_size=512, **common)),
        "qwen3moe": Qwen3MoeForCausalLM(Qwen3MoeConfig(intermediate_size=512, moe_intermediate_size=128, num_experts=4,
                                                       num_experts_per_tok=2, decoder_sparse_step=1, mlp_only_layers=[],
                                                       **common)),
    }
    paths = {}
    for name, model in models.items():
        paths[name] = os.path.join(root, name)
        model.to(torch.bfloat16).save_pretrained(paths[name])
        with open(os.path.join(paths[name], "tokenizer_config.json"), "w") as f:
            f.write('{"model_max_length": 2048}\n')  # a file to be copied
    return paths


def weight_files(directory):
    """A model directory's safetensors files, through the index when there is one."""
    index = os.path.join(directory, "model.safetensors.index.json")
    return sorted(set(json.load(open(index))["weight_map"].values())) if os.path.exists(index) else ["model.safetensors"]


def tensors_of(directory):
    """Every tensor of a model directory: name -> (dtype, shape), through the index when there is one."""
    out = {}
    for f in weight_files(directory):
        with safe_open(os.path.join(directory, f), "pt") as h:
            for k in h.keys():
                s = h.get_slice(k)
                out[k] = (s.get_dtype(), tuple(s.get_shape()))
    return out


def expected_tensors(source, scheme, fmt):
    """What vLLM registers for a serialized FP8 checkpoint, per checkpoint tensor (vllm-project/vllm,
    vllm/model_executor/layers/quantization/):
      fp8.py Fp8LinearMethod.create_weights: weight float8_e4m3fn [N, K]; per tensor a
        PerTensorScaleParameter of one float32 per shard ("weight_scale", loaded from a [1] tensor);
        with weight_block_size a BlockQuantScaleParameter float32 [ceil(N/bn), ceil(K/bk)] registered
        as "weight_scale_inv".
      fp8.py Fp8MoEMethod.create_weights: w13_weight_scale float32 [E, 2] and w2_weight_scale [E] per
        tensor, loaded from each expert's gate/up/down "weight_scale" [1]; blocks w13_weight_scale_inv
        [E, 2*ceil(I/bn), ceil(H/bk)], w2_weight_scale_inv [E, ceil(H/bn), ceil(I/bk)], from each
        expert's [ceil(rows/128), ceil(cols/128)] "weight_scale_inv".
      compressed_tensors/schemes/compressed_tensors_w8a8_fp8.py create_weights (and
        compressed_tensors_moe.py for experts): weight float8_e4m3fn; "weight_scale" float32 of
        [1] per shard (TENSOR), [N, 1] (CHANNEL: ChannelQuantScaleParameter), or
        [ceil(N/128), ceil(K/128)] (BLOCK).
    Everything else (embeddings, norms, the router, lm_head) stays as it was."""
    out = {}
    for name, (dtype, shape) in tensors_of(source).items():
        base = name[: -len(".weight")] if name.endswith(".weight") else None
        if base is None or not LINEAR.search(name) or len(shape) != 2:
            out[name] = (dtype, shape)
            continue
        n, k = shape
        out[name] = ("F8_E4M3", shape)
        if scheme == "fp8_per_tensor":
            out[base + ".weight_scale"] = ("F32", (1,))
        elif scheme == "fp8_per_channel":
            out[base + ".weight_scale"] = ("F32", (n, 1))
        else:
            suffix = ".weight_scale_inv" if fmt == "vllm-fp8" else ".weight_scale"
            out[base + suffix] = ("F32", (math.ceil(n / 128), math.ceil(k / 128)))
    return out


def quantize(source, out, scheme, fmt=None):
    args = [EXE, "quantize", "-q", scheme, source, "-o", out] + (["--format", fmt] if fmt else [])
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"{' '.join(args)} exited {r.returncode}: {r.stderr}")
    return r.stderr


def check_table(source, out, scheme, fmt, label):
    got, want = tensors_of(out), expected_tensors(source, scheme, fmt)
    if got != want:
        extra = sorted(set(got) - set(want))[:5]
        missing = sorted(set(want) - set(got))[:5]
        wrong = [(k, got[k], want[k]) for k in sorted(set(got) & set(want)) if got[k] != want[k]][:5]
        fail(f"{label}: tensors differ from vLLM's create_weights: extra {extra}, missing {missing}, wrong {wrong}")
    print(f"ok: {label}: {len(got)} tensors, each as vLLM's create_weights registers it")


def load(path):
    from transformers import AutoModelForCausalLM

    model, info = AutoModelForCausalLM.from_pretrained(path, output_loading_info=True)
    problems = {k: v for k, v in info.items() if v}
    return model, problems


def check_load(source, out, label):
    original, _ = load(source)
    model, problems = load(out)
    if problems:
        fail(f"{label}: transformers reports {problems}")
    # A forward pass runs: compressed-tensors decompresses the weights on the first one (its
    # ModelCompressor.decompress_model hook); transformers' fp8 method dequantized them at load on CPU.
    tokens = torch.randint(0, 512, (1, 8), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        logits = model(tokens).logits
    if not torch.isfinite(logits).all():
        fail(f"{label}: the loaded model's logits are not finite")
    want = {k: v.detach() for k, v in original.state_dict().items()}
    got = {k: v.detach() for k, v in model.state_dict().items()}
    leftover = [k for k in set(got) - set(want) if not re.search(r"\.weight_scale(_inv)?$", k)]
    if set(want) - set(got) or leftover:
        fail(f"{label}: loaded state dict differs in names: {sorted(set(want) - set(got))[:6]} {sorted(leftover)[:6]}")
    worst = 0.0
    quantized = 0
    for name, w in want.items():
        d = got[name]
        if d.shape != w.shape:
            fail(f"{label}: {name} loads as {tuple(d.shape)}, expected {tuple(w.shape)}")
        if not LINEAR.search(name):
            if not torch.equal(d.to(w.dtype), w):
                fail(f"{label}: {name} is not a quantized weight but changed")
            continue
        quantized += 1
        w32, d32 = w.float(), d.float()
        if torch.equal(d32, w32):
            fail(f"{label}: {name} was not quantized")
        # e4m3's half step (2^-4 relative), bf16 rounding of the scale and of the dequantized value
        # (2^-8), and the subnormal step of the largest scale a group can have (amax/448 * 2^-10).
        bound = 2**-4 * w32.abs() + 2**-8 * d32.abs() + w32.abs().max() / 448 * 2**-10
        excess = ((d32 - w32).abs() - bound).max().item()
        ratio = ((d32 - w32).abs() / bound).max().item()
        worst = max(worst, ratio)
        if excess > 0:
            fail(f"{label}: {name} dequantizes outside FP8's bound (worst error/bound {ratio:.3g})")
    print(f"ok: {label}: transformers loads it (nothing missing or unexpected); {quantized} dequantized weights within "
          f"FP8's bound (worst error/bound {worst:.3f}), everything else equal")


def check_compressed_tensors(out, label):
    from compressed_tensors.compressors import ModelCompressor
    from compressed_tensors.quantization import QuantizationConfig
    from transformers.utils.quantization_config import CompressedTensorsConfig

    qc = json.load(open(os.path.join(out, "config.json")))["quantization_config"]
    QuantizationConfig.model_validate({k: v for k, v in qc.items() if k not in ("sparsity_config", "transform_config")})
    compressor = ModelCompressor.from_compression_config(CompressedTensorsConfig(**qc))
    if compressor.quantization_config is None:
        fail(f"{label}: compressed-tensors sees no quantization config")
    print(f"ok: {label}: compressed-tensors validates the config ({len(compressor.quantization_config.config_groups)} "
          f"group, format {compressor.quantization_config.format})")


def check_llm_compressor(source, root):
    from llmcompressor import oneshot
    from llmcompressor.modifiers.quantization import QuantizationModifier
    from transformers import AutoModelForCausalLM

    theirs = os.path.join(root, "llmc-fp8-block")
    model = AutoModelForCausalLM.from_pretrained(source, dtype=torch.bfloat16)
    oneshot(model=model, recipe=QuantizationModifier(targets="Linear", scheme="FP8_BLOCK", ignore=["lm_head"]))
    model.save_pretrained(theirs, save_compressed=True)
    ours = os.path.join(root, "ours-fp8-block-ct")
    quantize(source, ours, "fp8_per_block", "compressed-tensors")
    qo = json.load(open(os.path.join(ours, "config.json")))["quantization_config"]
    qt = json.load(open(os.path.join(theirs, "config.json")))["quantization_config"]
    if qo != qt:
        fail(f"quantization_config differs from llm-compressor's: {json.dumps(qo, sort_keys=True)} vs {json.dumps(qt, sort_keys=True)}")
    a, b = {}, {}
    for d, t in ((ours, a), (theirs, b)):
        with safe_open(os.path.join(d, "model.safetensors"), "pt") as h:
            for k in h.keys():
                t[k] = h.get_tensor(k)
    if set(a) != set(b):
        fail(f"tensor names differ from llm-compressor's: {sorted(set(a) ^ set(b))[:6]}")
    codes = differing = scales = 0
    worst_scale = 0.0
    for k in sorted(a):
        x, y = a[k], b[k]
        if x.shape != y.shape:
            fail(f"{k}: shape {tuple(x.shape)}, llm-compressor {tuple(y.shape)}")
        if k.endswith(".weight_scale"):
            scales += x.numel()
            if x.dtype != torch.float32 or y.dtype != torch.bfloat16:
                fail(f"{k}: scale dtypes {x.dtype} / {y.dtype}; expected float32 (qpolicy) / bfloat16 (llm-compressor)")
            if not torch.equal(x.to(torch.bfloat16), y):
                fail(f"{k}: llm-compressor's scales are not qpolicy's rounded to bf16")
            worst_scale = max(worst_scale, ((x - y.float()).abs() / x).max().item())
        elif x.dtype == torch.float8_e4m3fn:
            xa, ya = x.view(torch.uint8).int(), y.view(torch.uint8).int()
            codes += x.numel()
            differing += (xa != ya).sum().item()
            if (xa - ya).abs().max().item() > 1:
                fail(f"{k}: codes differ from llm-compressor's by more than one step")
        elif not torch.equal(x, y):
            fail(f"{k}: copied tensor differs from llm-compressor's")
    print(f"ok: llm-compressor FP8_BLOCK: same tensors and quantization_config; its {scales} scales are qpolicy's "
          f"rounded to bf16 (at most {worst_scale:.2%} apart); {differing} of {codes} codes "
          f"({differing / codes:.2%}) differ by one step, where dividing by the rounded scale crosses a rounding boundary")


# (model, qpolicy's quantization_config, llm-compressor's scheme, its targets, transformers loads it)
LOW_PRECISION_CASES = [
    ("llama", '{"linear": "mxfp8"}', "MXFP8", "Linear", True),
    ("llama", '{"linear": "mxfp4"}', "MXFP4", "Linear", True),
    ("qwen3moe", '{"linear": "mxfp8", "moe": "mxfp8"}', "MXFP8", "Linear", False),
    ("qwen3moe", '{"linear": "mxfp4", "moe": "mxfp4"}', "MXFP4", "Linear", True),
    ("qwen3moe", '{"moe": "int8_per_channel_weight_only"}', "W8A16-channel", "re:.*mlp.experts.*", True),
    ("qwen3moe", '{"moe": "nvfp4_per_token"}', "NVFP4A16", "re:.*mlp.experts.*", False),
]
# The largest error a format's dequantized value may have, as a fraction of its block's (INT8: its
# row's) largest magnitude: e4m3 codes under an E8M0 scale that leaves amax/scale in [256, 512) saturate
# at 448 (1/8); e2m1 under an EVEN scale (amax/scale in [4, 8), saturating at 6: 1/4); NVFP4's e4m3
# block scale and e2m1 codes (half the largest step, 1/6, plus the scale's rounding); INT8's half step
# of amax/127, the model-dtype rounding of w/s (up to 1/4 step) and of the dequantized value (2^-9 of
# amax, another 1/4 step): 1.5 steps leave room.
LOW_PRECISION_BOUND = {"mxfp8-quantized": (32, 1 / 8), "mxfp4-pack-quantized": (32, 1 / 4),
                       "nvfp4-pack-quantized": (16, 1 / 4), "pack-quantized": (None, 1.5 / 127)}


def llm_compressor(source, out, scheme, targets):
    from compressed_tensors.quantization import QuantizationArgs, QuantizationScheme
    from llmcompressor import oneshot
    from llmcompressor.modifiers.quantization import QuantizationModifier
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(source, dtype=torch.bfloat16)
    ignore = ["lm_head", "re:.*mlp.gate$"]
    if scheme == "W8A16-channel":
        args = QuantizationArgs(num_bits=8, type="int", strategy="channel", symmetric=True, dynamic=False)
        recipe = QuantizationModifier(config_groups={"group_0": QuantizationScheme(targets=[targets], weights=args)}, ignore=ignore)
    else:
        recipe = QuantizationModifier(targets=targets, scheme=scheme, ignore=ignore)
    oneshot(model=model, recipe=recipe)
    model.save_pretrained(out, save_compressed=True)


def decompressed(directory):
    """Every quantized module's weight as compressed-tensors' decompressor for its group's format gives it."""
    from compressed_tensors.compressors import BaseCompressor
    from compressed_tensors.quantization import QuantizationArgs, QuantizationScheme

    qc = json.load(open(os.path.join(directory, "config.json")))["quantization_config"]
    (group,) = qc["config_groups"].values()
    scheme = QuantizationScheme(targets=group["targets"], weights=QuantizationArgs(**group["weights"]),
                                format=group["format"])
    compressor = BaseCompressor.get_value_from_registry(group["format"])
    tensors = {}
    with safe_open(os.path.join(directory, "model.safetensors"), "pt") as h:
        for k in h.keys():
            tensors[k] = h.get_tensor(k)
    out = {}
    for name in tensors:
        if name.endswith(".weight_scale"):
            module = name[: -len(".weight_scale")]
            local = {k[len(module) + 1:]: v for k, v in tensors.items() if k.startswith(module + ".weight")}
            out[module + ".weight"] = compressor.decompress(local, scheme)["weight"]
    return group, out, tensors


def check_low_precision(models, root):
    for model, config, scheme, targets, loads in LOW_PRECISION_CASES:
        label = f"{model} {config}"
        ours, theirs = os.path.join(root, f"lp-{model}-{scheme}"), os.path.join(root, f"llmc-{model}-{scheme}")
        args = [EXE, "quantize", "-q", "online", "-c", config, models[model], "-o", ours]
        r = subprocess.run(args, capture_output=True, text=True)
        if r.returncode != 0:
            fail(f"{' '.join(args)} exited {r.returncode}: {r.stderr}")
        llm_compressor(models[model], theirs, scheme, targets)
        if tensors_of(ours) != tensors_of(theirs):
            a, b = tensors_of(ours), tensors_of(theirs)
            fail(f"{label}: tensors differ from llm-compressor's {scheme}: "
                 f"{[(k, a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)][:4]}")
        group, got, ours_raw = decompressed(ours)
        their_group, _, theirs_raw = decompressed(theirs)
        for key in ("format", "weights", "input_activations"):
            if group[key] != their_group[key]:
                fail(f"{label}: config group {key} {group[key]} differs from llm-compressor's {their_group[key]}")
        block, fraction = LOW_PRECISION_BOUND[group["format"]]
        with safe_open(os.path.join(models[model], "model.safetensors"), "pt") as h:
            original = {k: h.get_tensor(k) for k in h.keys()}
        worst = 0.0
        for name, d in got.items():
            w = original[name].float()
            d = d.float()
            if d.shape != w.shape:
                fail(f"{label}: {name} decompresses to {tuple(d.shape)}, expected {tuple(w.shape)}")
            rows, cols = w.shape
            size = block or cols
            scale = w.reshape(rows, cols // size, size).abs().amax(-1, keepdim=True).expand(-1, -1, size).reshape(rows, cols)
            ratio = ((d - w).abs() / (fraction * scale).clamp_min(1e-30)).max().item()
            worst = max(worst, ratio)
            if ratio > 1:
                fail(f"{label}: {name} decompresses outside the format's bound (worst error/bound {ratio:.3g})")
        equal = total = 0
        scales_equal = scales_total = 0
        for k, x in ours_raw.items():
            y = theirs_raw[k]
            if k.endswith((".weight", ".weight_packed")) and k.rsplit(".", 1)[0] + ".weight_scale" in ours_raw:
                xa, ya = x.view(torch.uint8), y.view(torch.uint8)
                equal += (xa == ya).sum().item()
                total += xa.numel()
            elif k.endswith((".weight_scale", ".weight_global_scale")):
                scales_equal += (x.view(torch.uint8) == y.view(torch.uint8)).sum().item()
                scales_total += x.view(torch.uint8).numel()
            elif not k.endswith(".weight_shape") and not torch.equal(x, y):
                fail(f"{label}: {k} is not quantized but differs from llm-compressor's")
        print(f"ok: {label}: llm-compressor's {scheme} tensors and config group ({group['format']}); {len(got)} weights "
              f"decompress within the format's bound (worst error/bound {worst:.3f}); code bytes equal to "
              f"llm-compressor's: {equal}/{total} ({equal / total:.2%}), scale bytes {scales_equal}/{scales_total} "
              f"({scales_equal / scales_total:.2%})")
        if loads:
            _, problems = load(ours)
            if problems:
                fail(f"{label}: transformers reports {problems}")
            print(f"ok: {label}: transformers loads it, nothing missing or unexpected")


def sylvester(n):
    h = torch.ones(1, 1, dtype=torch.float64)
    while h.shape[0] < n:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    return h


def check_rotated(models, root):
    from llmcompressor import oneshot
    from llmcompressor.modifiers.quantization import QuantizationModifier
    from llmcompressor.modifiers.transform import QuIPModifier
    from transformers import AutoModelForCausalLM

    label = "llama -q mxfp4_hadamard32"
    ours, theirs = os.path.join(root, "rot-ours"), os.path.join(root, "rot-llmc")
    args = [EXE, "quantize", "-q", "mxfp4_hadamard32", models["llama"], "-o", ours]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"{' '.join(args)} exited {r.returncode}: {r.stderr}")
    model = AutoModelForCausalLM.from_pretrained(models["llama"], dtype=torch.bfloat16)
    oneshot(model=model, recipe=[QuIPModifier(rotations=["v"], transform_type="hadamard", transform_block_size=32, ignore=["lm_head"]),
                                 QuantizationModifier(targets="Linear", scheme="MXFP4", ignore=["lm_head"])])
    model.save_pretrained(theirs, save_compressed=True)
    a, b = tensors_of(ours), tensors_of(theirs)
    transform = [k for k in a if k.endswith(".v_input.weight")]
    if transform != ["model.layers.0.self_attn.q_proj.v_input.weight"] or a[transform[0]] != ("F32", (32, 32)):
        fail(f"{label}: expected one F32 [32, 32] transform weight on the first rotated module, got {[(k, a[k]) for k in transform]}")
    if b.get(transform[0]) != ("F64", (32, 32)):
        fail(f"{label}: llm-compressor's transform weight is {b.get(transform[0])}; the check expects F64 [32, 32]")
    b[transform[0]] = a[transform[0]]
    if a != b:
        fail(f"{label}: tensors differ from llm-compressor's: {[(k, a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)][:4]}")
    qa = json.load(open(os.path.join(ours, "config.json")))["quantization_config"]
    qb = json.load(open(os.path.join(theirs, "config.json")))["quantization_config"]
    if qa["transform_config"]["config_groups"]["v"].pop("precision") != "torch.float32":
        fail(f"{label}: the transform's precision is not torch.float32")
    qb["transform_config"]["config_groups"]["v"].pop("precision")
    if qa != qb:
        fail(f"{label}: quantization_config differs from llm-compressor's: {json.dumps(qa, sort_keys=True)} vs {json.dumps(qb, sort_keys=True)}")
    from compressed_tensors.transform import TransformConfig
    TransformConfig.model_validate(json.load(open(os.path.join(ours, "config.json")))["quantization_config"]["transform_config"])
    with safe_open(os.path.join(ours, "model.safetensors"), "pt") as h:
        if not torch.equal(h.get_tensor(transform[0]).double(), sylvester(32)):
            fail(f"{label}: the transform weight is not the Sylvester matrix")
    group, got, ours_raw = decompressed(ours)
    _, _, theirs_raw = decompressed(theirs)
    with safe_open(os.path.join(models["llama"], "model.safetensors"), "pt") as h:
        original = {k: h.get_tensor(k) for k in h.keys()}
    hn = sylvester(32) / math.sqrt(32)
    worst = worst_layer = 0.0
    for name, d in got.items():
        w = original[name].double()
        rows, cols = w.shape
        rotated = (w.reshape(rows, cols // 32, 32) @ hn).reshape(rows, cols)
        d = d.double()
        amax = rotated.reshape(rows, cols // 32, 32).abs().amax(-1, keepdim=True).expand(-1, -1, 32).reshape(rows, cols)
        # MXFP4's bound (1/4 of the block's amax) plus the bf16 rounding of the rotated value.
        ratio = ((d - rotated).abs() / (0.25 * amax + 2**-8 * rotated.abs()).clamp_min(1e-30)).max().item()
        worst = max(worst, ratio)
        if ratio > 1:
            fail(f"{label}: {name} decompresses outside MXFP4's bound of the rotated weight (worst error/bound {ratio:.3g})")
        x = torch.randn(16, cols, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
        y = x @ w.T
        y_rot = (x.reshape(16, cols // 32, 32) @ hn).reshape(16, cols) @ d.T
        rel = ((y_rot - y).norm() / y.norm()).item()
        worst_layer = max(worst_layer, rel)
        if rel > 0.16:  # MXFP4's layer bound (low-precision-numerics.md section 9)
            fail(f"{label}: {name}: (x H)(W_dec)^T is {rel:.3f} from x W^T (bound 0.16)")
    equal = total = 0
    for k, x in ours_raw.items():
        if k.endswith(".weight_packed"):
            equal += (x == theirs_raw[k]).sum().item()
            total += x.numel()
    print(f"ok: {label}: llm-compressor's QuIP (v, hadamard, 32) + MXFP4 tensors and quantization_config (its precision "
          f"float64, ours float32); {len(got)} weights decompress within MXFP4's bound of the rotated original (worst "
          f"error/bound {worst:.3f}); (x H)(W_dec)^T against x W^T: worst relative error {worst_layer:.3f}; code bytes equal "
          f"to llm-compressor's: {equal}/{total} ({equal / total:.2%})")


def main():
    import transformers
    import compressed_tensors

    print(f"witness-hf: torch {torch.__version__}, transformers {transformers.__version__}, "
          f"compressed-tensors {compressed_tensors.__version__}")
    with tempfile.TemporaryDirectory(prefix="qpolicy-witness-hf-") as root:
        models = make_models(root)
        cases = [
            # (model, scheme, format or None for the default, the default it should be, loads in transformers)
            ("llama", "fp8_per_tensor", None, "compressed-tensors", True),
            ("llama", "fp8_per_channel", None, "compressed-tensors", True),
            ("llama", "fp8_per_block", None, "vllm-fp8", True),
            ("llama", "fp8_per_block", "compressed-tensors", "compressed-tensors", True),
            # vLLM loads per-tensor weights in its fp8 format; transformers' fp8 method reads only
            # blocks and reports the scales as unexpected (qpolicy warns): the table check only.
            ("llama", "fp8_per_tensor", "vllm-fp8", "vllm-fp8", False),
            ("qwen3moe", "fp8_per_tensor", None, "compressed-tensors", True),
            ("qwen3moe", "fp8_per_channel", None, "compressed-tensors", True),
            ("qwen3moe", "fp8_per_block", None, "vllm-fp8", True),
            # transformers 5.17 cannot load block-quantized MoE experts in compressed-tensors format (its
            # weight conversion does not expand per-expert block scales): the table check only.
            ("qwen3moe", "fp8_per_block", "compressed-tensors", "compressed-tensors", False),
        ]
        for model, scheme, fmt, default, loads in cases:
            label = f"{model} {scheme} --format {fmt or 'default'}"
            out = os.path.join(root, f"{model}-{scheme}-{fmt}")
            err = quantize(models[model], out, scheme, fmt)
            if f"format: {default}" not in err:
                fail(f"{label}: expected format {default}; qpolicy said: {err}")
            if (fmt == "vllm-fp8" and scheme == "fp8_per_tensor") != ("transformers' fp8 method reads only" in err):
                fail(f"{label}: the warning about transformers' fp8 method is wrong: {err}")
            if not os.path.exists(os.path.join(out, "tokenizer_config.json")):
                fail(f"{label}: tokenizer_config.json was not copied")
            check_table(models[model], out, scheme, default, label)
            if default == "compressed-tensors":
                check_compressed_tensors(out, label)
            if loads:
                check_load(models[model], out, label)
        check_llm_compressor(models["llama"], root)
        check_low_precision(models, root)
        check_rotated(models, root)
    print("witness-hf: all checks passed")


if __name__ == "__main__":
    main()
