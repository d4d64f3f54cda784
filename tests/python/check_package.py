#!/usr/bin/env python3
"""The qpolicy Python package against the qpolicy CLI (run by tests/python/run.sh in a fresh venv).

1. The 200 shared config cases through qpolicy.resolve / qpolicy.plan give what the CLI gives for the
   same arguments: the same JSON document, or a ConfigError whose (loc, message) pairs are the CLI's
   "error:" lines (and, for a plan with failed layers, the plan the CLI printed).
2. quantize_tensor on ml_dtypes bfloat16, float16 and float32 arrays is byte-equal to quantize-tensor's
   output file for every key and formula it implements (and for --ue8m0 and the scale layouts).
3. The errors: ConfigError's loc, message and errors; TypeError and ValueError for inputs the kernels
   do not take, with the library's messages.
4. The README's "Using qpolicy from Python" snippet runs and prints what its "# " comment lines say.
5. dequantize_tensor of quantize_tensor's parts equals `quantize-tensor --dequantize` of the file, for every
   key, in f32, bf16 and fp16, row and swizzled block scales.
6. plan_model_dir on tiny quantized model directories (fp8, compressed-tensors) gives the CLI's
   `plan --model-dir` document, a ConfigError carrying it for failed layers, and vLLM's refusals.
With QPOLICY_TORCH_ONLY=1 (the venv that has torch): torch bfloat16, float16 and float32 tensors give the bytes
the CLI gives. Prints one line per check; exits 1 at the first failure.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile
import threading
import warnings

import numpy as np
import qpolicy

EXE = os.environ["QPOLICY_EXE"]
SHARED = os.environ["QPOLICY_SHARED"]


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def cli(args):
    r = subprocess.run([EXE] + args, capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


def cli_errors(stderr):
    """The CLI's "error: LOC: MESSAGE" lines as (loc, message), loc "" when the message names none."""
    out = []
    for line in stderr.splitlines():
        if not line.startswith("error: "):
            continue
        text = line[len("error: "):]
        out.append(text)
    return out


def error_texts(e):
    return [f"{loc}: {message}" if loc else message for loc, message in e.errors]


def check_config_cases(root):
    """Every release case (under its release) and the legacy cases of config_cases.json, through the
    package and the CLI; the CLI's results are checked against the expectations by the C++ suite."""
    cases = json.load(open(os.path.join(SHARED, "conformance", "vllm_release_cases.json")))["cases"]
    cases += [c for c in json.load(open(os.path.join(SHARED, "conformance", "config_cases.json")))["cases"]
              if c["schema"] == "legacy"]
    resolved = planned = refused = 0
    for case in cases:
        args = [case["command"]]
        if case["schema"] == "legacy":
            args.append("--legacy")
        release = case.get("vllm")
        if release is not None:
            args += ["--vllm", release]
        if case.get("quantization") is not None:
            args += ["-q", case["quantization"]]
        config_text = json.dumps(case["config"]) if "config" in case else None
        if config_text is not None:
            args += ["-c", config_text]
        if case["command"] == "plan":
            model_path = os.path.join(root, "model.json")
            with open(model_path, "w") as f:
                json.dump(case["model"], f)
            args += ["--model", model_path, "--format", "json"]
        status, out, err = cli(args)
        label = case["id"]
        try:
            if case["command"] == "resolve":
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    got = qpolicy.resolve(case.get("quantization"), config_text, legacy=case["schema"] == "legacy",
                                          vllm=release)
                said = [line[len("warning: "):] for line in err.splitlines() if line.startswith("warning: ")]
                if [str(w.message) for w in caught] != said:
                    fail(f"{label}: warnings {[str(w.message) for w in caught]}, the CLI's {said}")
            else:
                got = qpolicy.plan(config_text, case["model"], quantization=case.get("quantization"),
                                   legacy=case["schema"] == "legacy", vllm=release)
        except qpolicy.ConfigError as e:
            if status != 2:
                fail(f"{label}: ConfigError {e} where the CLI exited {status}")
            if error_texts(e)[:1] != cli_errors(err)[:1] or (e.plan is None and error_texts(e) != cli_errors(err)):
                fail(f"{label}: ConfigError {error_texts(e)} where the CLI said {cli_errors(err)}")
            if e.plan is not None and {"layers": e.plan.layers, "summary": e.plan.summary, "warnings": e.plan.warnings} != json.loads(out):
                fail(f"{label}: the failed plan differs from the CLI's")
            refused += 1
            continue
        if status != 0:
            fail(f"{label}: no error where the CLI exited {status}: {err}")
        want = json.loads(out)
        if case["command"] == "resolve":
            if got != want:
                fail(f"{label}: resolve gave {got}, the CLI {want}")
            resolved += 1
        else:
            if {"layers": got.layers, "summary": got.summary, "warnings": got.warnings} != want:
                fail(f"{label}: the plan differs from the CLI's")
            for layer in got.layers:
                got.explain(layer["name"])
            planned += 1
    print(f"ok: {len(cases)} shared config cases give the CLI's results: {resolved} resolved, {planned} planned, "
          f"{refused} refused with the CLI's errors")
    if qpolicy.releases() != ["0.30", "0.31", "0.32", "0.33", "0.34"]:
        fail(f"releases() gave {qpolicy.releases()}")
    try:
        qpolicy.resolve("online", {"linear": "fp8_per_block"}, vllm="0.29")
        fail("vllm='0.29' was accepted")
    except ValueError as e:
        if str(e) != "vllm must be a vLLM release qpolicy knows, one of ['0.30', '0.31', '0.32', '0.33', '0.34']; got '0.29'":
            fail(f"vllm='0.29' gave {e}")
    print("ok: the package takes vllm= for each release and refuses an unknown one, naming the known ones")


def write_safetensors(path, name, dtype, array):
    data = array.tobytes()
    header = json.dumps({name: {"dtype": dtype, "shape": list(array.shape), "data_offsets": [0, len(data)]}}).encode()
    header += b" " * (-len(header) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header + data)


def read_safetensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    return {k: raw[8 + n + v["data_offsets"][0]: 8 + n + v["data_offsets"][1]] for k, v in header.items()}


KEYS = qpolicy._qpolicy.keys().split(", ")


def check_quantize_tensor(root, make_input, label):
    """make_input(rows, cols, kind) -> (the array qpolicy takes, its numpy bits, the safetensors dtype)."""
    rng = np.random.default_rng(3)
    compared = 0
    decoded_count = [0]
    for key in KEYS:
        for kind in ("bf16", "f16", "f32"):
            variants = [([], {})]
            if key in ("fp8_per_block_static", "fp8_per_block_dynamic"):
                variants.append((["--ue8m0"], {"ue8m0": True}))
            if key == "fp8_per_block_dynamic":
                variants += [(["--scale-layout", "col"], {"scale_layout": "col"}), (["--scale-layout", "col-tma"], {"scale_layout": "col-tma"})]
            if key in ("mxfp8", "mxfp4", "nvfp4"):
                variants.append((["--scale-layout", "swizzled"], {"scale_layout": "swizzled"}))
            for flags, options in variants:
                values = (rng.standard_normal((130, 256)) * 0.05).astype(np.float32)
                x, bits, st_dtype = make_input(values, kind)
                path, out = os.path.join(root, "in.safetensors"), os.path.join(root, "out.safetensors")
                write_safetensors(path, "w", st_dtype, bits)
                status, _, err = cli(["quantize-tensor", "--key", key] + flags + [path, "-o", out])
                try:
                    got = qpolicy.quantize_tensor(x, key, **options)
                except ValueError as e:
                    if status != 2 or str(e) not in err:
                        fail(f"{label} {key} {kind} {flags}: ValueError {e} where the CLI exited {status}: {err}")
                    continue
                if status != 0:
                    fail(f"{label} {key} {kind} {flags}: no error where the CLI exited {status}: {err}")
                want = read_safetensors(out)
                mine = {("w" if n == "codes" else "w." + n): a.tobytes() for n, a in got.items()}
                if mine != want:
                    fail(f"{label} {key} {kind} {flags}: bytes differ from quantize-tensor's "
                         f"({sorted(mine)} vs {sorted(want)}, {[k for k in want if mine.get(k) != want[k]]})")
                compared += 1
                layout = options.get("scale_layout", "row")
                if make_input is numpy_input and kind == "bf16" and layout in ("row", "swizzled") and not options.get("ue8m0"):
                    # dequantize_tensor of the parts equals `quantize-tensor --dequantize` of the file, in every dtype.
                    for dtype in ("f32", "bf16", "f16"):
                        back = os.path.join(root, "back.safetensors")
                        status, _, err = cli(["quantize-tensor", "--key", key, "--dequantize", "--dtype", dtype] +
                                             (["--scale-layout", "swizzled"] if layout == "swizzled" else []) + [out, "-o", back])
                        if status != 0:
                            fail(f"{key} --dequantize --dtype {dtype}: the CLI exited {status}: {err}")
                        decoded = qpolicy.dequantize_tensor(got, key, dtype=dtype, scale_layout=layout)
                        if decoded.tobytes() != read_safetensors(back)["w"] or decoded.shape != (130, 256):
                            fail(f"{key} {flags}: dequantize_tensor({dtype}) differs from quantize-tensor --dequantize")
                        decoded_count[0] += 1
    decoded = (f"; dequantize_tensor equals quantize-tensor --dequantize in {decoded_count[0]} runs (f32, bf16, f16)"
               if decoded_count[0] else "")
    print(f"ok: {label}: quantize_tensor equals quantize-tensor's output byte for byte in {compared} runs "
          f"({len(KEYS)} keys and formulas x bf16/f16/f32 x flags; the refusals are the CLI's){decoded}")


def numpy_input(values, kind):
    import ml_dtypes

    if kind == "bf16":
        x = values.astype(ml_dtypes.bfloat16)
        return x, x.view(np.uint16), "BF16"
    if kind == "f16":
        x = values.astype(np.float16)
        return x, x, "F16"
    return values, values, "F32"


def torch_input(values, kind):
    import torch

    t = torch.from_numpy(values)
    if kind == "bf16":
        t = t.to(torch.bfloat16)
        return t, t.view(torch.int16).numpy(), "BF16"
    if kind == "f16":
        t = t.to(torch.float16)
        return t, t.numpy(), "F16"
    return t, t.numpy(), "F32"


def check_cuda_tensors():
    """CUDA tensors are quantized on their device with the CPU kernels' bytes (a GPU and a CUDA build)."""
    import torch

    if not torch.cuda.is_available():
        print("python: the CUDA tensor checks are skipped: no CUDA device")
        return
    x = (torch.randn(130, 256) * 0.05).to(torch.bfloat16)
    if not qpolicy.WITH_CUDA:
        try:
            qpolicy.quantize_tensor(x.cuda(), "fp8_per_token")
            fail("a build without CUDA took a CUDA tensor")
        except ValueError as e:
            if "built without CUDA" not in str(e):
                fail(f"a CUDA tensor in a build without CUDA: {e}")
        print("ok: a build without CUDA refuses CUDA tensors with a message")
        return
    compared = 0
    for key in KEYS:
        try:
            want = qpolicy.quantize_tensor(x, key)
        except ValueError:
            continue
        got = qpolicy.quantize_tensor(x.cuda(), key)
        for name, array in want.items():
            if not got[name].is_cuda or got[name].cpu().numpy().tobytes() != array.tobytes():
                fail(f"CUDA tensor, {key}: {name} differs from the CPU kernels' bytes")
        compared += 1
    print(f"ok: CUDA tensors: {compared} keys and formulas quantize on the device, byte-equal to the CPU kernels")


def check_errors():
    try:
        qpolicy.resolve("online", {"linear": "bogus", "moe": {"weight": "nope"}})
        fail("an invalid config raised nothing")
    except qpolicy.ConfigError as e:
        if e.loc != "linear" or not e.message.startswith("unknown quantization name 'bogus'") or len(e.errors) != 2:
            fail(f"ConfigError fields: loc {e.loc!r}, message {e.message!r}, errors {e.errors}")
        if e.errors[1][0] != "moe.weight" or not isinstance(e, ValueError):
            fail(f"ConfigError's second error: {e.errors[1]}")
    try:
        qpolicy.plan({"linear": "fp8_per_block"}, {"layers": [{"name": "a", "kind": "linear", "bogus": 1}]})
        fail("an invalid model raised nothing")
    except qpolicy.ConfigError as e:
        if e.plan is not None or "bogus" not in str(e):
            fail(f"an invalid model: {e}")
    for bad, kind in ((np.zeros((4, 64), np.int32), TypeError), (np.zeros((2, 4, 64), np.float32), ValueError)):
        try:
            qpolicy.quantize_tensor(bad, "fp8_per_token")
            fail(f"quantize_tensor took {bad.dtype} {bad.shape}")
        except kind:
            pass
    for key, message in (("nope", "unknown key 'nope'"), ("mxfp8", "MXFP8 requires input_size_per_partition (48) to be divisible by 32.")):
        try:
            qpolicy.quantize_tensor(np.zeros((4, 48), np.float32), key)
            fail(f"quantize_tensor {key} on K = 48 raised nothing")
        except ValueError as e:
            if message not in str(e):
                fail(f"quantize_tensor {key}: {e}")
    # dequantize_tensor: a part of the wrong size names it, its stored shape and what came.
    import ml_dtypes

    parts = dict(qpolicy.quantize_tensor(np.zeros((4, 64), ml_dtypes.bfloat16), "nvfp4"))
    parts["scale"] = parts["scale"][:, :2]
    try:
        qpolicy.dequantize_tensor(parts, "nvfp4")
        fail("dequantize_tensor took a scale of the wrong size")
    except ValueError as e:
        if "nvfp4's scale for a [4, 64] tensor are F8_E4M3 [4, 4] (16 bytes); got 8 bytes" not in str(e):
            fail(f"dequantize_tensor with a short scale: {e}")
    # The GIL is released while a kernel runs: threads quantize at once and get the same bytes.
    x = (np.random.default_rng(5).standard_normal((512, 1024)) * 0.1).astype(np.float32)
    want = qpolicy.quantize_tensor(x, "fp8_per_block_static")["codes"].tobytes()
    results = []
    threads = [threading.Thread(target=lambda: results.append(qpolicy.quantize_tensor(x, "fp8_per_block_static")["codes"].tobytes()))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if results != [want] * 4:
        fail("quantize_tensor from four threads at once gave different bytes")
    print("ok: ConfigError carries loc, message and every error; invalid models raise it; quantize_tensor raises TypeError and "
          "ValueError with the library's messages; four threads quantize at once with the same bytes")


def check_readme_snippet():
    import contextlib
    import io
    import re

    readme = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "README.md")).read()
    section = readme.split("\n## Using qpolicy from Python\n", 1)[1].split("\n## ", 1)[0]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md (Using qpolicy from Python)", "exec"), {})
    want = [line[2:] for line in code.splitlines() if line.startswith("# ")]
    if out.getvalue().splitlines() != want:
        fail(f"the README's Python snippet printed {out.getvalue().splitlines()}, its comments say {want}")
    print(f"ok: the README's Python snippet runs and prints its {len(want)} commented lines")


def write_names(path, names):
    """A safetensors file holding the named tensors (2 x 2 bf16 zeros): what a plan reads is their names."""
    header, offset = {}, 0
    for name in names:
        header[name] = {"dtype": "BF16", "shape": [2, 2], "data_offsets": [offset, offset + 8]}
        offset += 8
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw + bytes(offset))


def check_plan_model_dir(root):
    names = ["model.embed_tokens.weight", "lm_head.weight"]
    for l in range(2):
        p = f"model.layers.{l}."
        names += [p + f"self_attn.{x}_proj.weight" for x in "qkvo"] + [p + "mlp.gate.weight"]
        names += [p + f"mlp.experts.{e}.{x}_proj.weight" for e in range(4) for x in ("gate", "up", "down")]
    checkpoints = {
        "fp8": {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128], "ignored_layers": ["lm_head"]},
        "ct": {"quant_method": "compressed-tensors", "ignore": ["lm_head", "re:.*mlp.gate$"],
               "config_groups": {"group_0": {"targets": ["re:.*mlp.experts.*"], "format": "nvfp4-pack-quantized",
                                             "weights": {"type": "float", "num_bits": 4, "strategy": "tensor_group", "group_size": 16}}}},
    }
    cases = [("fp8", None, None, None), ("fp8", {"moe": "mxfp4"}, None, "0.33"), ("ct", {"moe": "fp8_per_block"}, None, None),
             ("ct", {"moe": "fp8_per_block"}, None, "0.32"), ("fp8", None, "fp8_per_tensor", None)]
    for name, qc in checkpoints.items():
        d = os.path.join(root, "dir-" + name)
        os.makedirs(d)
        write_names(os.path.join(d, "model.safetensors"), names)
        json.dump({"model_type": "qwen3_moe", "quantization_config": qc}, open(os.path.join(d, "config.json"), "w"))
    for name, config, quantization, vllm in cases:
        d = os.path.join(root, "dir-" + name)
        args = ["plan", "--model-dir", d, "--format", "json"] + (["-c", json.dumps(config)] if config else [])
        args += (["-q", quantization] if quantization else []) + (["--vllm", vllm] if vllm else [])
        status, out, err = cli(args)
        label = " ".join(args[1:])
        try:
            got = qpolicy.plan_model_dir(d, config, quantization=quantization, vllm=vllm)
            if status != 0:
                fail(f"{label}: the package planned it; the CLI exited {status}: {err}")
            if {"layers": got.layers, "summary": got.summary, "warnings": got.warnings, "checkpoint": got.checkpoint} != json.loads(out):
                fail(f"{label}: plan_model_dir's document differs from the CLI's")
        except qpolicy.ConfigError as e:
            if status != 2 or error_texts(e)[0] != cli_errors(err)[0]:
                fail(f"{label}: ConfigError {error_texts(e)[:1]}; the CLI exited {status} with {cli_errors(err)[:1]}")
            if out and (e.plan is None or e.plan.layers != json.loads(out)["layers"]):
                fail(f"{label}: the ConfigError's plan differs from the CLI's")
    try:
        qpolicy.plan_model_dir(os.path.join(root, "no-such-dir"))
        fail("plan_model_dir on a missing directory did not raise")
    except OSError as e:
        if "no-such-dir" not in str(e):
            fail(f"plan_model_dir on a missing directory: {e}")
    print(f"ok: plan_model_dir equals `qpolicy plan --model-dir` on {len(cases)} quantized-checkpoint cases (kept, requantized, "
          "the releases' errors, vLLM's quantization-argument check); OSError for a missing directory")


def main():
    print(f"python: qpolicy {qpolicy.__version__} (CUDA: {qpolicy.WITH_CUDA}), numpy {np.__version__}")
    with tempfile.TemporaryDirectory(prefix="qpolicy-python-") as root:
        if os.environ.get("QPOLICY_TORCH_ONLY"):
            import torch

            print(f"python: torch {torch.__version__}")
            check_quantize_tensor(root, torch_input, "torch tensors")
            check_cuda_tensors()
            return
        check_config_cases(root)
        check_quantize_tensor(root, numpy_input, "NumPy and ml_dtypes arrays")
        check_errors()
        check_readme_snippet()
        check_plan_model_dir(root)
    print("python: all checks passed")


if __name__ == "__main__":
    main()
