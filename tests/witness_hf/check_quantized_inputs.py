#!/usr/bin/env python3
"""The witness-hf suite, part 2: `qpolicy quantize` on already-quantized model directories.

Run by tests/witness_hf/run.sh in .venv-hf after check_model_dirs.py. Each input is made by
llm-compressor from a tiny random bf16 model (a Llama and a Qwen3-MoE, as part 1 makes them):
  1. FP8_DYNAMIC with lm_head and every o_proj ignored, then the o_proj layers quantized online
     (fp8_per_block): every kept tensor is the input's byte for byte; the o_proj codes and scales are
     what qpolicy writes for the same layers of the bf16 model; the quantization_config keeps
     llm-compressor's group (its targets narrowed) beside a float-quantized block group, validates as
     compressed-tensors' QuantizationConfig, and transformers loads the directory with every kept
     weight equal to what it loads from llm-compressor's directory and each o_proj within FP8's
     bound of the original.
  2. NVFP4A16 experts requantized to fp8_per_block (vLLM 0.33+ requantizes NVFP4 MoE: its
     dequantize_nvfp4_moe_weights then the online method): the experts are decoded here in torch, as
     vLLM's CPU path does (e2m1 x (e4m3 scale x (1 / weight_global_scale)) in float32, then bf16), and
     `qpolicy quantize-tensor --key fp8_per_block_static` of that decode must give the output's codes
     and scales bit for bit; compressed-tensors' float-quantized decompressor turns them back into
     weights within FP8's bound of the decode.
  3. gpt-oss (transformers' GptOssForCausalLM, tiny) stored in its own HF MXFP4 format, the experts as fused
     `*_blocks`/`*_scales` beside bf16 attention, then the attention quantized online (fp8_per_channel): the
     experts, biases, router, embeddings and LM head are the input's byte for byte; each attention weight's codes
     and [N] scales are what `qpolicy quantize-tensor --key fp8_per_channel_static` gives the bf16 weight and
     decode within FP8's bound of it; the quantization_config is Quark's (the format vLLM's gpt-oss loader reads
     fused MXFP4 experts with beside quantized linear layers). transformers' own MXFP4 dequantizer
     (convert_moe_packed_tensors) and `qpolicy quantize-tensor --key mxfp4 --dequantize` decode the kept blocks
     to the same bf16 bits, and transformers loads the input directory (dequantized) with finite logits; the
     output needs amd-quark in transformers, which this environment does not have.
Prints one line per check and exits 1 on the first failure.
"""
import json
import os
import subprocess
import sys
import tempfile

import torch
from safetensors import safe_open
from safetensors.torch import save_file

sys.path.insert(0, os.path.dirname(__file__))
from check_model_dirs import EXE, fail, make_models, weight_files  # noqa: E402


def read_all(directory):
    """Every tensor of a model directory: name -> tensor."""
    out = {}
    for f in weight_files(directory):
        with safe_open(os.path.join(directory, f), "pt") as h:
            for k in h.keys():
                out[k] = h.get_tensor(k)
    return out


def qpolicy(*args):
    r = subprocess.run([EXE, *args], capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"qpolicy {' '.join(args)} exited {r.returncode}: {r.stderr}")
    return r.stderr


def llm_compressor(source, out, recipe):
    from llmcompressor import oneshot
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(source, dtype=torch.bfloat16)
    oneshot(model=model, recipe=recipe)
    model.save_pretrained(out, save_compressed=True)


def same_bytes(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.view(torch.uint8) if a.dtype.itemsize == 1 else a, b.view(torch.uint8) if b.dtype.itemsize == 1 else b)


def check_fp8_dynamic(models, root):
    from compressed_tensors.quantization import QuantizationConfig
    from llmcompressor.modifiers.quantization import QuantizationModifier
    from transformers import AutoModelForCausalLM

    label = "llm-compressor FP8_DYNAMIC (o_proj ignored) + online fp8_per_block o_proj"
    source = os.path.join(root, "llmc-fp8-dynamic")
    llm_compressor(models["llama"], source, QuantizationModifier(targets="Linear", scheme="FP8_DYNAMIC", ignore=["lm_head", "re:.*o_proj$"]))
    ours = os.path.join(root, "fp8-dynamic-requant")
    config = '{"targets": {"re:.*o_proj$": "fp8_per_block"}}'
    # vLLM takes the online config beside a quantized checkpoint with quantization=None (its
    # quantization argument must otherwise name the checkpoint's method).
    err = qpolicy("quantize", "-c", config, source, "-o", ours)
    if "kept (the checkpoint's compressed-tensors): 6" not in err or "quantized online: 2" not in err:
        fail(f"{label}: expected 6 kept and 2 online layers; qpolicy said: {err}")
    # The same o_proj layers quantized from the bf16 model: the online path's bits.
    direct = os.path.join(root, "fp8-block-o-proj-direct")
    qpolicy("quantize", "-q", "online", "-c", config, "--format", "compressed-tensors", models["llama"], "-o", direct)
    got, src, want = read_all(ours), read_all(source), read_all(direct)
    kept = online = 0
    for name, t in got.items():
        if ".o_proj." in name:
            if not same_bytes(t, want[name]):
                fail(f"{label}: {name} differs from the same layer quantized from the bf16 model")
            online += 1
        else:
            if name not in src or not same_bytes(t, src[name]):
                fail(f"{label}: kept tensor {name} is not the input's byte for byte")
            kept += 1
    missing = sorted(k for k in src if k not in got and ".o_proj." not in k)
    if missing:
        fail(f"{label}: input tensors missing from the output: {missing[:5]}")
    qc = json.load(open(os.path.join(ours, "config.json")))["quantization_config"]
    theirs = json.load(open(os.path.join(source, "config.json")))["quantization_config"]
    groups = qc["config_groups"]
    if list(groups) != ["group_0", "online_group_0"] or qc["format"] != "float-quantized":  # one format: no mix
        fail(f"{label}: config groups {list(groups)}, format {qc['format']}")
    kept_group, their_group = dict(groups["group_0"]), dict(theirs["config_groups"]["group_0"])
    kept_group.pop("targets"), their_group.pop("targets")
    if kept_group != their_group:
        fail(f"{label}: the kept group's arguments changed: {kept_group} vs {their_group}")
    if groups["online_group_0"]["weights"]["strategy"] != "block" or qc["ignore"] != ["lm_head"]:
        fail(f"{label}: online group {groups['online_group_0']}, ignore {qc['ignore']}")
    QuantizationConfig.model_validate({k: v for k, v in qc.items() if k not in ("sparsity_config", "transform_config")})
    print(f"ok: {label}: {kept} kept tensors byte for byte, {online} online tensors equal the bf16 model's conversion; "
          f"config keeps llm-compressor's group beside the online one and validates")
    original = AutoModelForCausalLM.from_pretrained(models["llama"], dtype=torch.bfloat16).state_dict()
    mine, info = AutoModelForCausalLM.from_pretrained(ours, output_loading_info=True)
    problems = {k: v for k, v in info.items() if v}
    if problems:
        fail(f"{label}: transformers reports {problems}")
    reference_model = AutoModelForCausalLM.from_pretrained(source)
    tokens = torch.randint(0, 512, (1, 8), generator=torch.Generator().manual_seed(1))
    # The first forward pass decompresses the weights (compressed-tensors' hook).
    with torch.no_grad():
        if not torch.isfinite(mine(tokens).logits).all():
            fail(f"{label}: the loaded model's logits are not finite")
        reference_model(tokens)
    state, reference = mine.state_dict(), reference_model.state_dict()
    worst = 0.0
    for name, w in original.items():
        if ".o_proj." in name:
            w32, d32 = w.float(), state[name].float()
            bound = 2**-4 * w32.abs() + 2**-8 * d32.abs() + w32.abs().max() / 448 * 2**-10
            ratio = ((d32 - w32).abs() / bound).max().item()
            worst = max(worst, ratio)
            if ratio > 1:
                fail(f"{label}: {name} loads outside FP8's bound of the original ({ratio:.3g})")
        elif not torch.equal(state[name], reference[name]):
            fail(f"{label}: {name} loads differently from llm-compressor's directory")
    print(f"ok: {label}: transformers loads it; kept weights as from llm-compressor's directory, o_proj within FP8's bound "
          f"(worst error/bound {worst:.3f})")


E2M1 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])


def nvfp4_decode(packed, scale, global_scale):
    """vLLM's dequantize_to_dtype on the CPU, fed as dequantize_nvfp4_moe_weights feeds it."""
    codes = torch.stack([packed & 0xF, packed >> 4], dim=-1).reshape(packed.shape[0], -1).long()
    values = E2M1[codes]
    rows, k = values.shape
    s = scale.view(torch.float8_e4m3fn).to(torch.float32) * (1.0 / global_scale.float())
    return (values.reshape(rows, k // 16, 16) * s.unsqueeze(-1)).reshape(rows, k).to(torch.bfloat16)


def check_nvfp4_experts(models, root):
    from compressed_tensors.compressors import BaseCompressor
    from compressed_tensors.quantization import QuantizationArgs, QuantizationScheme
    from llmcompressor.modifiers.quantization import QuantizationModifier

    label = "compressed-tensors NVFP4A16 experts requantized to fp8_per_block"
    source = os.path.join(root, "llmc-nvfp4-experts")
    llm_compressor(models["qwen3moe"], source,
                   QuantizationModifier(targets="re:.*mlp.experts.*", scheme="NVFP4A16", ignore=["lm_head", "re:.*mlp.gate$"]))
    ours = os.path.join(root, "nvfp4-requant")
    err = qpolicy("quantize", "-c", '{"moe": "fp8_per_block"}', source, "-o", ours)
    if "requantized (decoded, then the online method): 2" not in err:
        fail(f"{label}: expected 2 requantized layers; qpolicy said: {err}")
    src, got = read_all(source), read_all(ours)
    modules = sorted(k[: -len(".weight_packed")] for k in src if k.endswith(".weight_packed"))
    decoded = {}
    for m in modules:
        decoded[m] = nvfp4_decode(src[m + ".weight_packed"], src[m + ".weight_scale"], src[m + ".weight_global_scale"])
        for suffix in (".weight_packed", ".weight_global_scale"):
            if m + suffix in got:
                fail(f"{label}: {m + suffix} is still in the output")
    work = os.path.join(root, "nvfp4-decoded")
    os.makedirs(work)
    save_file({m + ".weight": w for m, w in decoded.items()}, os.path.join(work, "decoded.safetensors"))
    qpolicy("quantize-tensor", "--key", "fp8_per_block_static", os.path.join(work, "decoded.safetensors"), "-o",
            os.path.join(work, "fp8.safetensors"))
    with safe_open(os.path.join(work, "fp8.safetensors"), "pt") as h:
        for m in modules:
            codes, scale = h.get_tensor(m + ".weight"), h.get_tensor(m + ".weight.scale")
            if not same_bytes(got[m + ".weight"], codes) or not torch.equal(got[m + ".weight_scale"], scale):
                fail(f"{label}: {m} differs from fp8_per_block_static of the torch decode")
    qc = json.load(open(os.path.join(ours, "config.json")))["quantization_config"]
    (group,) = qc["config_groups"].values()
    scheme = QuantizationScheme(targets=group["targets"], weights=QuantizationArgs(**group["weights"]), format=group["format"])
    compressor = BaseCompressor.get_value_from_registry(group["format"])
    worst = 0.0
    for m in modules:
        w = compressor.decompress({"weight": got[m + ".weight"], "weight_scale": got[m + ".weight_scale"]}, scheme)["weight"].float()
        ref = decoded[m].float()
        bound = 2**-4 * ref.abs() + 2**-8 * w.abs() + ref.abs().max() / 448 * 2**-10
        ratio = ((w - ref).abs() / bound).max().item()
        worst = max(worst, ratio)
        if ratio > 1:
            fail(f"{label}: {m} decompresses outside FP8's bound of its NVFP4 decode ({ratio:.3g})")
    # compressed-tensors' own NVFP4 decompressor divides by the global scale; vLLM multiplies by its
    # reciprocal (what qpolicy follows): how often the two differ, for the record.
    nv = BaseCompressor.get_value_from_registry("nvfp4-pack-quantized")
    their = json.load(open(os.path.join(source, "config.json")))["quantization_config"]["config_groups"]["group_0"]
    nv_scheme = QuantizationScheme(targets=their["targets"], weights=QuantizationArgs(**their["weights"]), format=their["format"])
    differ = total = 0
    for m in modules:
        local = {k[len(m) + 1:]: v for k, v in src.items() if k.startswith(m + ".weight")}
        ct = nv.decompress(local, nv_scheme)["weight"].to(torch.bfloat16)
        differ += (ct != decoded[m]).sum().item()
        total += ct.numel()
    print(f"ok: {label}: {len(modules)} expert weights equal fp8_per_block_static of vLLM's NVFP4 decode bit for bit, "
          f"their NVFP4 tensors gone; compressed-tensors decompresses them within FP8's bound (worst {worst:.3f}); "
          f"compressed-tensors' division order differs from vLLM's in {differ} of {total} decoded values")


E2M1_GRID = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def mxfp4_blocks(w):
    """[E, N, K] float weights as gpt-oss's HF MXFP4 tensors: blocks [E, N, K/32, 16] (element 2j in the low
    nibble) and E8M0 scales [E, N, K/32] (floor(log2(amax)) - 2, the OCP MX rule), codes nearest on the grid."""
    e, n, k = w.shape
    x = w.float().reshape(e, n, k // 32, 32)
    amax = x.abs().amax(-1, keepdim=True)
    exp = torch.where(amax > 0, torch.floor(torch.log2(amax)) - 2, torch.full_like(amax, -127)).clamp(-127, 127)
    y = (x / torch.exp2(exp)).clamp(-6, 6)
    code = (y.abs().unsqueeze(-1) - E2M1_GRID).abs().argmin(-1) | ((y < 0).to(torch.int64) << 3)
    code = code.to(torch.uint8)
    blocks = code[..., 0::2] | (code[..., 1::2] << 4)
    return blocks.contiguous(), (exp.squeeze(-1) + 127).to(torch.uint8)


def check_gpt_oss(root):
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM, GptOssConfig, GptOssForCausalLM, Mxfp4Config
    from transformers.integrations.mxfp4 import convert_moe_packed_tensors

    label = "gpt-oss HF MXFP4 experts kept + online fp8_per_channel attention"
    torch.manual_seed(0)
    config = GptOssConfig(vocab_size=512, hidden_size=128, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                          num_key_value_heads=2, head_dim=32, num_local_experts=4, num_experts_per_tok=2,
                          max_position_embeddings=256, sliding_window=64, layer_types=["sliding_attention", "full_attention"])
    bf16 = os.path.join(root, "gpt-oss-bf16")
    GptOssForCausalLM(config).to(torch.bfloat16).save_pretrained(bf16)
    source = os.path.join(root, "gpt-oss-mxfp4")
    os.makedirs(source)
    state = read_all(bf16)
    for name in [k for k in state if k.endswith(("experts.gate_up_proj", "experts.down_proj"))]:
        # transformers keeps the experts as [E, K, N]; the HF MXFP4 format stores [E, N, ...] blocks.
        blocks, scales = mxfp4_blocks(state.pop(name).transpose(1, 2))
        state[name + "_blocks"], state[name + "_scales"] = blocks, scales
    save_file(state, os.path.join(source, "model.safetensors"), metadata={"format": "pt"})
    cfg = json.load(open(os.path.join(bf16, "config.json")))
    cfg["quantization_config"] = {"quant_method": "mxfp4", "modules_to_not_convert": [
        "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}
    json.dump(cfg, open(os.path.join(source, "config.json"), "w"), indent=2)

    ours = os.path.join(root, "gpt-oss-quark")
    err = qpolicy("quantize", "-c", '{"linear": "fp8_per_channel"}', source, "-o", ours)
    for want in ("kept (the checkpoint's gpt_oss_mxfp4): 2", "quantized online: 4", "format: quark"):
        if want not in err:
            fail(f"{label}: expected '{want}'; qpolicy said: {err}")
    got, src = read_all(ours), read_all(source)
    attention = [k for k in src if ".self_attn." in k and k.endswith("_proj.weight")]
    if len(attention) != 8:
        fail(f"{label}: expected 8 attention weights, found {attention}")
    for name, t in src.items():
        if name in attention:
            continue
        if name not in got or not same_bytes(t, got[name]):
            fail(f"{label}: {name} is not the input's byte for byte")
    worst = 0.0
    for name in attention:
        module = name[: -len(".weight")]
        single = os.path.join(root, "gpt-oss-one.safetensors")
        save_file({"T": src[name]}, single)
        qpolicy("quantize-tensor", "--key", "fp8_per_channel_static", single, "-o", single + ".out")
        want = load_file(single + ".out")
        codes, scale = got[name], got[module + ".weight_scale"]
        if scale.shape != (codes.shape[0],) or scale.dtype != torch.float32:
            fail(f"{label}: {module}.weight_scale is {scale.dtype} {tuple(scale.shape)}; Quark's is float32 [N]")
        if not same_bytes(codes, want["T"]) or not torch.equal(scale, want["T.scale"].reshape(-1)):
            fail(f"{label}: {name} differs from quantize-tensor's fp8_per_channel_static of the bf16 weight")
        w32, d32 = src[name].float(), codes.float() * scale[:, None]
        bound = 2**-4 * w32.abs() + w32.abs().amax(1, keepdim=True) / 448 * 2**-9
        worst = max(worst, ((d32 - w32).abs() / bound).max().item())
    if worst > 1:
        fail(f"{label}: an attention weight decodes outside FP8's bound (worst error/bound {worst:.3g})")
    qc = json.load(open(os.path.join(ours, "config.json")))["quantization_config"]
    layers = qc["layer_quant_config"]
    experts = layers.get("model.layers.0.mlp.experts", {})
    if qc["quant_method"] != "quark" or experts.get("input_tensors") is not None or experts["weight"]["dtype"] != "fp4":
        fail(f"{label}: quantization_config {qc}")
    if sorted(k for k in layers if "self_attn" in k) != sorted(a[: -len(".weight")] for a in attention):
        fail(f"{label}: layer_quant_config names {sorted(layers)}")
    print(f"ok: {label}: every kept tensor byte for byte, 8 attention weights equal quantize-tensor's per-channel FP8 with "
          f"[N] scales (worst error/bound {worst:.3f}); Quark quantization_config")
    decoded = 0
    for name in [k for k in got if k.endswith("_blocks")]:
        theirs = convert_moe_packed_tensors(got[name], got[name.replace("_blocks", "_scales")]).transpose(1, 2)
        for e in range(theirs.shape[0]):
            single = os.path.join(root, "gpt-oss-expert.safetensors")
            blocks = got[name][e]
            save_file({"T": blocks.reshape(blocks.shape[0], -1).contiguous(),
                       "T.scale": got[name.replace("_blocks", "_scales")][e].contiguous()}, single)
            qpolicy("quantize-tensor", "--key", "mxfp4", "--dequantize", "--dtype", "bf16", single, "-o", single + ".out")
            mine = load_file(single + ".out")["T"]
            if not torch.equal(mine, theirs[e].contiguous()):
                fail(f"{label}: qpolicy's MXFP4 decode of {name}[{e}] differs from transformers' convert_moe_packed_tensors")
            decoded += 1
    model, info = AutoModelForCausalLM.from_pretrained(source, quantization_config=Mxfp4Config(dequantize=True), dtype=torch.bfloat16,
                                                       output_loading_info=True)
    if any(info.values()):
        fail(f"{label}: transformers reports {info} loading the MXFP4 input")
    with torch.no_grad():
        logits = model(torch.randint(0, 512, (1, 8), generator=torch.Generator().manual_seed(1))).logits
    if not torch.isfinite(logits).all():
        fail(f"{label}: transformers' dequantized input gives non-finite logits")
    print(f"ok: {label}: {decoded} kept expert matrices decode to the same bf16 bits in transformers' MXFP4 dequantizer and "
          f"qpolicy's; transformers loads the input directory (dequantized); the Quark output needs amd-quark there")


def main():
    with tempfile.TemporaryDirectory(prefix="qpolicy-witness-hf-quantized-") as root:
        models = make_models(root)
        check_fp8_dynamic(models, root)
        check_nvfp4_experts(models, root)
        check_gpt_oss(root)
    print("witness-hf quantized inputs: all checks passed")


if __name__ == "__main__":
    main()
