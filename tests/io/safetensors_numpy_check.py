"""Tandem's safetensors files against numpy alone (no torch, no safetensors).

Usage: safetensors_numpy_check.py SAFETENSORS_LOGITS_BINARY [FLAG...]
(each FLAG, e.g. --device=cuda, is passed to every run of the binary)

1. The binary trains the Fashion-MNIST MLP a few steps and exports it (F32
   and BF16) with the logits of the first 16 test images. This script parses
   the F32 file itself (8-byte length, JSON header, np.frombuffer),
   recomputes the forward pass in float64 and matches Tandem's logits; the
   BF16 file must hold the F32 weights rounded to nearest even.
2. It writes files of its own (random weights, F32 and BF16), has the binary
   import them, and matches the logits the binary computes with them.

Logits match when |tandem - numpy| <= 1e-5 for every logit (absolute).
"""
import gzip
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

DATA_DIR = "/usr/share/datasets/fashion-mnist"  # Debian's dataset-fashion-mnist
TOLERANCE = 1e-5


def bf16_bits(values):
    """float32 -> bfloat16 bits, rounded to nearest even (finite values)."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def widen_bf16(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def read_safetensors(path):
    """{name: (dtype, array as float32)} and the metadata, with numpy only."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    assert n % 8 == 0, f"{path}: header of {n} bytes is not padded to a multiple of 8"
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    data = raw[8 + n:]
    metadata = header.pop("__metadata__", {})
    tensors = {}
    end_of_data = 0
    for name, info in header.items():
        begin, end = info["data_offsets"]
        end_of_data = max(end_of_data, end)
        if info["dtype"] == "F32":
            values = np.frombuffer(data[begin:end], dtype="<f4")
        elif info["dtype"] == "BF16":
            values = widen_bf16(np.frombuffer(data[begin:end], dtype="<u2"))
        else:
            raise AssertionError(f"{path}: {name} has dtype {info['dtype']}")
        tensors[name] = (info["dtype"], values.reshape(info["shape"]))
    assert end_of_data == len(data), f"{path}: {len(data) - end_of_data} bytes after the tensors"
    return tensors, metadata


def write_safetensors(path, params, dtype):
    """A safetensors file written with numpy alone: tensors in reverse name
    order (so file order is not name order), json.dumps's spacing."""
    header, chunks, offset = {}, [], 0
    for name in sorted(params, reverse=True):
        values = params[name]
        stored = bf16_bits(values).astype("<u2") if dtype == "BF16" else values.astype("<f4")
        raw = stored.tobytes()
        header[name] = {"dtype": dtype, "shape": list(values.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    header["__metadata__"] = {"format": "pt", "writer": "numpy"}
    text = json.dumps(header).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))


def forward(params, x):
    """The MLP in float64: fc_i(h) = h @ W.T + b, ReLU between layers."""
    layers = sorted({name.split(".")[0] for name in params}, key=lambda l: int(l[2:]))
    h = x.astype(np.float64)
    for i, layer in enumerate(layers):
        h = h @ params[layer + ".weight"].astype(np.float64).T + params[layer + ".bias"]
        if i + 1 < len(layers):
            h = np.maximum(h, 0.0)
    return h


def first_test_images(data_dir, n):
    """The first n test images in [0, 1] as float32, read from the IDX file."""
    with gzip.open(os.path.join(data_dir, "t10k-images-idx3-ubyte.gz"), "rb") as f:
        raw = f.read()
    magic, count, rows, cols = struct.unpack(">IIII", raw[:16])
    assert magic == 0x803 and count >= n, (magic, count)
    pixels = np.frombuffer(raw[16:16 + n * rows * cols], dtype=np.uint8)
    return pixels.reshape(n, rows * cols).astype(np.float32) / np.float32(255)


def compare(what, tandem, reference):
    worst = float(np.max(np.abs(tandem.astype(np.float64) - reference)))
    print(f"{what}: max |tandem - numpy| = {worst:.3g} over {tandem.size} logits "
          f"(|logit| up to {float(np.max(np.abs(reference))):.3g})")
    assert tandem.shape == reference.shape, (tandem.shape, reference.shape)
    assert worst <= TOLERANCE, f"{what}: logits differ by {worst}, more than {TOLERANCE}"


def main(tool, extra_flags):
    tmp = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
    path = lambda name: os.path.join(tmp, name)
    run = lambda *flags: subprocess.run([tool, *flags, *extra_flags], check=True)

    # 1. Tandem exports; numpy reads and recomputes.
    run("--export=" + path("tandem.safetensors"),
        "--export_bf16=" + path("tandem_bf16.safetensors"),
        "--inputs=" + path("inputs.npy"), "--logits=" + path("logits.npy"))
    x = np.load(path("inputs.npy"))
    assert x.shape == (16, 784) and x.dtype == np.float32, (x.shape, x.dtype)
    data_dir = DATA_DIR
    for flag in extra_flags:
        if flag.startswith("--data_dir="):
            data_dir = flag[len("--data_dir="):]
    if all(os.path.exists(os.path.join(data_dir, f"{split}-images-idx3-ubyte.gz"))
           for split in ("train", "t10k")):
        assert np.array_equal(x, first_test_images(data_dir, 16)), "inputs: not the test images"
        print("inputs: the first 16 Fashion-MNIST test images, bit for bit")
    else:
        print(f"inputs: no Fashion-MNIST in {data_dir}: fixed random images")
    tensors, metadata = read_safetensors(path("tandem.safetensors"))
    assert metadata == {"format": "pt"}, metadata
    shapes = {name: t.shape for name, (_, t) in tensors.items()}
    assert shapes == {"fc1.weight": (512, 784), "fc1.bias": (512,), "fc2.weight": (256, 512),
                      "fc2.bias": (256,), "fc3.weight": (10, 256), "fc3.bias": (10,)}, shapes
    assert all(dtype == "F32" for dtype, _ in tensors.values())
    params = {name: t for name, (_, t) in tensors.items()}
    compare("Tandem's export", np.load(path("logits.npy")), forward(params, x))

    half, _ = read_safetensors(path("tandem_bf16.safetensors"))
    for name, (dtype, values) in half.items():
        assert dtype == "BF16", (name, dtype)
        assert np.array_equal(values, widen_bf16(bf16_bits(params[name]))), name
    print("Tandem's BF16 export: every weight is its F32 master rounded to nearest even")

    # 2. numpy writes; Tandem imports and computes.
    rng = np.random.default_rng(20)
    mine = {}
    for name, shape in shapes.items():
        scale = np.sqrt(2.0 / shape[-1]) if name.endswith("weight") else 0.1
        mine[name] = (rng.standard_normal(shape) * scale).astype(np.float32)
    for dtype in ("F32", "BF16"):
        file = path(f"numpy_{dtype}.safetensors")
        write_safetensors(file, mine, dtype)
        run("--import=" + file, "--logits=" + path(f"import_{dtype}.npy"))
        weights = mine if dtype == "F32" else {n: widen_bf16(bf16_bits(v)) for n, v in mine.items()}
        compare(f"numpy's {dtype} file in Tandem", np.load(path(f"import_{dtype}.npy")),
                forward(weights, x))
    print("ok: Tandem and numpy agree on both files of each side")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2:])
