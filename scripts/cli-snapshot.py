#!/usr/bin/env python3
"""Records what the qpolicy CLI prints and writes, for a refactoring's "byte-identical" check.

    scripts/cli-snapshot.py BUILD/qpolicy OUT_DIR

Runs `resolve` and `plan` (json and table, with and without --check-shapes --tp 2) on every case of
../shared/conformance/config_cases.json, `quantize` on a small dense and MoE checkpoint for each FP8
scheme (with --config-out), and `quantize-tensor` for every key and option, on deterministic inputs.
Each run's exit status, stdout, stderr and a SHA-256 of each output file go to OUT_DIR/NAME.txt
(timings and temporary paths are masked). Compare two snapshots with `diff -r`.
"""
import hashlib
import json
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import tempfile

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
shared = os.path.join(root, "..", "shared")
binary, out_dir = os.path.abspath(sys.argv[1]), sys.argv[2]
os.makedirs(out_dir, exist_ok=True)
work = tempfile.mkdtemp(prefix="qpolicy-snapshot-")


def mask(text):
    text = text.replace(work, "WORK")
    text = re.sub(r"\d+\.\d+ (s|GB/s|MB/s)\b", r"T \1", text)
    return text


def record(name, args, outputs=()):
    for path in outputs:
        if os.path.exists(path):
            os.remove(path)
    r = subprocess.run([binary] + args, capture_output=True, text=True, cwd=work)
    lines = [f"exit {r.returncode}", "--- stdout", mask(r.stdout), "--- stderr", mask(r.stderr)]
    for path in outputs:
        if os.path.exists(path):
            with open(path, "rb") as f:
                lines.append(f"--- {os.path.basename(path)} sha256 {hashlib.sha256(f.read()).hexdigest()}")
        else:
            lines.append(f"--- {os.path.basename(path)} absent")
    with open(os.path.join(out_dir, name + ".txt"), "w") as f:
        f.write("\n".join(lines))


def bf16_bits(v):
    return struct.unpack("<I", struct.pack("<f", v))[0] >> 16


def write_safetensors(path, tensors):
    """tensors: list of (name, shape, random seed); bf16 values ~ N(0, 0.05)."""
    header, blobs, offset = {}, [], 0
    for name, shape, seed in tensors:
        rng = random.Random(seed)
        count = 1
        for d in shape:
            count *= d
        data = struct.pack(f"<{count}H", *(bf16_bits(rng.gauss(0.0, 0.05)) for _ in range(count)))
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


# 1. Config cases: resolve and plan.
cases = json.load(open(os.path.join(shared, "conformance", "config_cases.json")))["cases"]
for i, case in enumerate(cases):
    args = [case["command"]]
    if case["schema"] == "legacy":
        args.append("--legacy")
    if case.get("quantization") is not None:
        args += ["-q", case["quantization"]]
    if "config" in case and case["config"] is not None:
        args += ["-c", json.dumps(case["config"])]
    if case["command"] == "plan":
        if "model" in case:
            model = os.path.join(work, f"model-{i}.json")
            json.dump(case["model"], open(model, "w"))
        else:
            model = os.path.join(shared, "models", case["model_name"] + ".json")
        args += ["--model", model]
        record(f"case-{i:03d}-json", args + ["--format", "json"])
        record(f"case-{i:03d}-table", args + ["--format", "table"])
        record(f"case-{i:03d}-shapes", args + ["--format", "json", "--check-shapes", "--tp", "2"])
    else:
        record(f"case-{i:03d}", args)

# 2. quantize: a dense checkpoint (fused q/k/v, gate/up, a shape that is not a multiple of 128) and a MoE one.
dense = os.path.join(work, "dense.safetensors")
write_safetensors(dense, [
    ("model.embed_tokens.weight", [64, 256], 1),
    ("model.layers.0.self_attn.q_proj.weight", [256, 256], 2),
    ("model.layers.0.self_attn.k_proj.weight", [128, 256], 3),
    ("model.layers.0.self_attn.v_proj.weight", [128, 256], 4),
    ("model.layers.0.self_attn.o_proj.weight", [256, 256], 5),
    ("model.layers.0.mlp.gate_proj.weight", [384, 256], 6),
    ("model.layers.0.mlp.up_proj.weight", [384, 256], 7),
    ("model.layers.0.mlp.down_proj.weight", [256, 384], 8),
    ("model.layers.0.input_layernorm.weight", [1, 256], 9),
    ("lm_head.weight", [64, 256], 10),
])
moe = os.path.join(work, "moe.safetensors")
moe_tensors = [("model.embed_tokens.weight", [32, 256], 20),
               ("model.layers.0.self_attn.q_proj.weight", [256, 256], 21),
               ("model.layers.0.mlp.gate.weight", [4, 256], 22)]
for e in range(4):
    moe_tensors += [(f"model.layers.0.mlp.experts.{e}.gate_proj.weight", [192, 256], 30 + e),
                    (f"model.layers.0.mlp.experts.{e}.up_proj.weight", [192, 256], 40 + e),
                    (f"model.layers.0.mlp.experts.{e}.down_proj.weight", [256, 192], 50 + e)]
write_safetensors(moe, moe_tensors)
out, cfg = os.path.join(work, "out.safetensors"), os.path.join(work, "config-out.json")
for name, ckpt in (("dense", dense), ("moe", moe)):
    for scheme in ("fp8_per_tensor", "fp8_per_block", "fp8_per_channel", "mxfp8", "mxfp4", "int8_per_channel_weight_only",
                   "nvfp4_per_token"):
        record(f"quantize-{name}-{scheme}", ["quantize", "-q", scheme, "-o", out, "--config-out", cfg,
                                             "--threads", "2", ckpt], [out, cfg])
    record(f"quantize-{name}-targets", ["quantize", "-q", "online", "-c",
                                        json.dumps({"linear": {"weight": "fp8_per_channel_static"},
                                                    "moe": {"weight": "fp8_per_block_static"},
                                                    "ignore": ["re:.*o_proj"]}),
                                        "-o", out, "--config-out", cfg, ckpt], [out, cfg])

# 3. quantize-tensor: every key, the options, shapes that fail.
tensors = os.path.join(work, "tensors.safetensors")
write_safetensors(tensors, [("a", [200, 256], 60), ("b", [3, 384], 61), ("c", [129, 128], 62)])
odd = os.path.join(work, "odd.safetensors")
write_safetensors(odd, [("d", [5, 100], 63)])
f32 = os.path.join(work, "f32.safetensors")
with open(f32, "wb") as f:
    text = json.dumps({"e": {"dtype": "F32", "shape": [4, 64], "data_offsets": [0, 1024]}}).encode()
    f.write(struct.pack("<Q", len(text)) + text + struct.pack("<256f", *(random.Random(64).gauss(0, 1) for _ in range(256))))
keys = ["fp8_per_tensor_static", "fp8_per_tensor_dynamic", "fp8_per_token", "fp8_per_channel_static",
        "fp8_per_block_static", "fp8_per_block_dynamic", "mxfp8", "mxfp8_dynamic", "mxfp4", "mxfp4_dynamic",
        "int8_per_channel_static", "nvfp4", "nvfp4_per_token", "no_such_key"]
for key in keys:
    record(f"qt-{key}", ["quantize-tensor", "--key", key, tensors, "-o", out], [out])
    record(f"qt-{key}-odd", ["quantize-tensor", "--key", key, odd, "-o", out], [out])
    record(f"qt-{key}-f32", ["quantize-tensor", "--key", key, f32, "-o", out], [out])
    for extra in (["--scale-layout", "swizzled"], ["--ue8m0"], ["--scale-layout", "col"], ["--device", "cuda"]):
        record(f"qt-{key}-{'-'.join(x.strip('-') for x in extra)}", ["quantize-tensor", "--key", key] + extra +
               [tensors, "-o", out], [out])
for extra in (["--ue8m0"], ["--scale-layout", "col"], ["--scale-layout", "col-tma"], ["--ue8m0", "--scale-layout", "col-tma"]):
    for key in ("fp8_per_block_dynamic", "fp8_per_block_static"):
        record(f"qt-{key}-{'-'.join(x.strip('-') for x in extra)}", ["quantize-tensor", "--key", key] + extra +
               [tensors, "-o", out], [out])

# 4. Help texts.
for cmd in ([], ["resolve"], ["plan"], ["quantize"], ["quantize-tensor"]):
    record("help-" + ("-".join(cmd) or "main"), cmd + ["--help"])
shutil.rmtree(work)
print(f"snapshot: {len(os.listdir(out_dir))} records in {out_dir}")
