"""Tandem's .npy reader against files numpy itself writes.

Usage: npy_numpy_check.py NPY_DUMP_BINARY

Writes arrays with numpy (np.save, and np.lib.format.write_array for format
versions 2.0 and 3.0) into $TEST_TMPDIR, has the binary load them, and checks
that every value Tandem loaded equals numpy's, converted as LoadNpyDataset
documents: float32 as is, float64 rounded to float32, uint8 times 1/255 in
float32, labels as float32 class indices. Files Tandem refuses (Fortran
order, big-endian, float16) must fail with an error naming the reason.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

TOOL = sys.argv[1]
DIR = os.environ.get("TEST_TMPDIR") or tempfile.mkdtemp()
failures = []


def path(name):
    return os.path.join(DIR, name)


def save(name, array, version=None):
    if version is None:
        np.save(path(name), array, allow_pickle=False)
    else:
        with open(path(name), "wb") as f:
            np.lib.format.write_array(f, array, version=version, allow_pickle=False)
    return path(name)


def run(*args):
    result = subprocess.run([TOOL, *args], capture_output=True, text=True)
    return result.returncode, result.stdout


def load(features, labels, *extra):
    code, out = run(features, labels, *extra)
    if code != 0:
        failures.append(f"{features}, {labels}: exit {code}: {out}")
        return None
    fields = {}
    for line in out.splitlines():
        key, _, rest = line.partition(" ")
        fields[key] = rest.split()
    return fields


def check_dataset(name, x, y, expected_x, num_classes=None, version=None):
    fx = save(name + "_x.npy", x, version)
    fy = save(name + "_y.npy", y, version)
    got = load(fx, fy, *([str(num_classes)] if num_classes else []))
    if got is None:
        return
    n = x.shape[0]
    want_x = np.asarray(expected_x, dtype=np.float32).reshape(n, -1)
    got_x = np.array([float(v) for v in got["features"]], dtype=np.float32)
    got_y = np.array([float(v) for v in got["labels"]], dtype=np.float32)
    classes = num_classes or int(y.max()) + 1
    checks = [
        (int(got["size"][0]) == n, f"size {got['size']} != {n}"),
        (int(got["feature_size"][0]) == want_x.shape[1],
         f"feature_size {got['feature_size']} != {want_x.shape[1]}"),
        (int(got["num_classes"][0]) == classes, f"num_classes {got['num_classes']} != {classes}"),
        (np.array_equal(got_x, want_x.ravel()), f"features differ: {got_x[:8]} vs {want_x.ravel()[:8]}"),
        (np.array_equal(got_y, y.astype(np.float32)), f"labels differ: {got_y} vs {y}"),
    ]
    for ok, message in checks:
        if not ok:
            failures.append(f"{name}: {message}")
    print(f"ok   {name}: {x.dtype}{list(x.shape)} + {y.dtype}{list(y.shape)}"
          f" (format {version or 'np.save'})" if all(ok for ok, _ in checks) else f"FAIL {name}")


def check_refused(name, array, needle):
    code, out = run("--read", save(name, array))
    if code == 1 and needle in out and path(name) in out:
        print(f"ok   {name}: refused ({needle})")
    else:
        failures.append(f"{name}: expected an error with '{needle}', got exit {code}: {out}")


rng = np.random.default_rng(0)
f32 = rng.standard_normal((5, 3, 4)).astype(np.float32)
check_dataset("f32_i64", f32, np.array([0, 3, 1, 2, 1], dtype=np.int64), f32)
u8 = rng.integers(0, 256, size=(4, 28, 28), dtype=np.uint8)
scaled = u8.astype(np.float32) * np.float32(1.0 / 255)
check_dataset("u8_u8", u8, np.array([9, 0, 4, 2], dtype=np.uint8), scaled, num_classes=10)
f64 = rng.standard_normal((3, 2))
check_dataset("f64_i32", f64, np.array([1, 0, 1], dtype=np.int32), f64.astype(np.float32))
check_dataset("f32_f32", f32[:, 0, :], np.array([2, 0, 1, 1, 0], dtype=np.float32), f32[:, 0, :])
for version in [(1, 0), (2, 0), (3, 0)]:
    check_dataset(f"v{version[0]}", f32, np.array([0, 1, 2, 3, 4], dtype=np.int64), f32,
                  version=version)

code, out = run("--read", save("shape.npy", np.zeros((2, 0, 7), dtype=np.int32)))
if code != 0 or "dtype '<i4'" not in out or "shape 2 0 7" not in out:
    failures.append(f"shape.npy: {out}")

check_refused("fortran.npy", np.asfortranarray(f32[:, :, 0]), "fortran_order is True")
check_refused("big.npy", f32.astype(">f4"), "unsupported dtype '>f4' (big-endian)")
check_refused("f16.npy", f32.astype(np.float16), "unsupported dtype '<f2'")

if failures:
    print("\n".join("FAIL " + f for f in failures))
    sys.exit(1)
print("all .npy files numpy wrote load with numpy's values")
