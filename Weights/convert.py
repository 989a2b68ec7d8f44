#!/usr/bin/env python3
"""Convert an Ultralytics YOLO checkpoint (.pt) into a `yolo-safetensors/1` file for yolo-swift.

    pip install torch ultralytics
    python Weights/convert.py MODEL.pt [-o OUT.safetensors] [--dtype f16|f32] [--fuse]

Works for official checkpoints and for your own trained ones (`runs/detect/train/weights/best.pt`).
The output is a standard safetensors file: tensor names are the Ultralytics `state_dict()` keys
(minus `num_batches_tracked`), and `__metadata__` carries the architecture and model facts that
yolo-swift needs (see Weights/README.md). torch and ultralytics are only needed to unpickle the
checkpoint; the file itself is written with struct + json + numpy (no `safetensors` package).

By default the weights are written as they are in the checkpoint: a training checkpoint keeps its
BatchNorm tensors (`bn_eps` is then recorded) and, for YOLO26, both the one-to-many and the
one-to-one head. `--fuse` folds BatchNorm into the convolutions and drops the head branch that is
not used for inference (YOLO26 and other end-to-end models keep the one-to-one head), which gives
a smaller file with the same outputs.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import struct
import sys
from pathlib import Path

import numpy as np

FORMAT = "yolo-safetensors/1"
DEFAULT_LICENSE = "AGPL-3.0 License (https://ultralytics.com/license)"

# numpy dtype -> safetensors dtype name
_ST_DTYPES = {
    np.dtype("float16"): "F16",
    np.dtype("float32"): "F32",
    np.dtype("float64"): "F64",
    np.dtype("int8"): "I8",
    np.dtype("uint8"): "U8",
    np.dtype("int16"): "I16",
    np.dtype("int32"): "I32",
    np.dtype("int64"): "I64",
    np.dtype("bool"): "BOOL",
}


# --------------------------------------------------------------------------------------------------
# safetensors writer (pure python)
# --------------------------------------------------------------------------------------------------
def write_safetensors(path: str | Path, tensors: dict[str, np.ndarray], metadata: dict[str, str]) -> None:
    """Write `tensors` (name -> numpy array) and string `metadata` as a safetensors file.

    Layout as written by the reference implementation: u64 little-endian header size, a compact JSON
    header (`__metadata__` first, then tensors), padded with spaces to a multiple of 8 bytes, then the
    little-endian tensor data back to back. Tensors are ordered by decreasing element size, then name.
    """
    for k, v in metadata.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise TypeError(f"metadata must be str -> str, got {k!r}: {type(v).__name__}")
    arrays = {}
    for name, a in tensors.items():
        a = np.asarray(a)
        if a.dtype not in _ST_DTYPES:
            raise TypeError(f"{name}: unsupported dtype {a.dtype}")
        arrays[name] = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<"))
    order = sorted(arrays, key=lambda n: (-arrays[n].dtype.itemsize, n))

    header: dict = {"__metadata__": metadata}
    offset = 0
    for name in order:
        a = arrays[name]
        header[name] = {"dtype": _ST_DTYPES[a.dtype], "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
    hbytes = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    hbytes += b" " * (-len(hbytes) % 8)

    tmp = Path(str(path) + ".part")
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(hbytes)))
        f.write(hbytes)
        for name in order:
            f.write(arrays[name].tobytes(order="C"))
    tmp.replace(path)


# --------------------------------------------------------------------------------------------------
# checkpoint loading and metadata
# --------------------------------------------------------------------------------------------------
def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def load_checkpoint(path: Path):
    """Return (ckpt dict, model) with model = ckpt['ema'] or ckpt['model'], as Ultralytics does."""
    try:
        import torch  # noqa: F401
        from ultralytics.nn.tasks import torch_safe_load
    except ImportError as e:  # pragma: no cover
        sys.exit(f"convert.py needs torch and ultralytics to read the checkpoint: pip install torch ultralytics ({e})")
    ckpt, _ = torch_safe_load(str(path))  # handles Ultralytics' legacy module paths
    if not isinstance(ckpt, dict):
        sys.exit(f"{path}: not an Ultralytics checkpoint (expected a dict with 'model'/'ema', got {type(ckpt).__name__})")
    model = ckpt.get("ema") or ckpt.get("model")
    if model is None or not hasattr(model, "state_dict"):
        sys.exit(f"{path}: checkpoint has neither 'ema' nor 'model'")
    if ckpt.get("modelopt"):
        print("warning: QAT checkpoint; writing its float weights without fake-quantization", file=sys.stderr)
    return ckpt, model.float().eval()


def head_of(model):
    seq = getattr(model, "model", None)
    try:
        return seq[-1]
    except (TypeError, IndexError):
        return None


def model_task(model, ckpt) -> str:
    task = getattr(model, "task", None) or (ckpt.get("train_args") or {}).get("task")
    if not task:
        from ultralytics.nn.tasks import guess_model_task

        task = guess_model_task(model)
    return str(task)


def build_metadata(src: Path, ckpt: dict, model, state: dict) -> dict[str, str]:
    import torch
    import ultralytics

    arch = dict(model.yaml)
    if not arch.get("scale") and arch.get("scales"):
        from ultralytics.nn.tasks import guess_model_scale

        arch["scale"] = guess_model_scale(arch.get("yaml_file", src.name)) or next(iter(arch["scales"]))
    task = model_task(model, ckpt)

    names = getattr(model, "names", None) or {}
    if isinstance(names, (list, tuple)):
        names = dict(enumerate(names))
    names = {str(int(k)): str(v) for k, v in names.items()}

    stride = getattr(model, "stride", None)
    stride = stride.tolist() if hasattr(stride, "tolist") else (stride if stride is not None else [32])
    stride = [int(round(float(s))) for s in (stride if isinstance(stride, (list, tuple)) else [stride])]

    train_args = ckpt.get("train_args") or {}
    if not train_args and isinstance(getattr(model, "args", None), dict):
        train_args = model.args
    imgsz = train_args.get("imgsz") or (224 if task == "classify" else 640)

    head = head_of(model)
    end2end = getattr(head, "one2one_cv2", None) is not None

    md = {
        "format": FORMAT,
        "arch": json.dumps(arch),
        "task": task,
        "names": json.dumps(names),
        "stride": json.dumps(stride),
        "imgsz": json.dumps(imgsz),
        "end2end": json.dumps(bool(end2end)),
    }
    if task == "pose":
        kpt = getattr(model, "kpt_shape", None) or getattr(head, "kpt_shape", None) or arch.get("kpt_shape")
        md["kpt_shape"] = json.dumps([int(x) for x in kpt])

    bn_prefixes = {n for n, m in model.named_modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)}
    bn_present = {n for n in bn_prefixes if any(k.startswith(n + ".") for k in state)}
    if bn_present:
        eps = {float(m.eps) for n, m in model.named_modules() if n in bn_present}
        if len(eps) != 1:
            sys.exit(f"BatchNorm layers use different eps values {sorted(eps)}; the format records only one")
        md["bn_eps"] = json.dumps(eps.pop())

    md.update(
        source=src.name,
        source_sha256=sha256_file(src),
        ultralytics_version=str(ckpt.get("version") or ultralytics.__version__),
        date=str(ckpt.get("date") or datetime.datetime.now().isoformat()),
        license=str(ckpt.get("license") or DEFAULT_LICENSE),
    )
    return md


def convert(src: Path, out: Path, dtype: str = "f16", fuse: bool = False) -> dict[str, str]:
    import torch

    ckpt, model = load_checkpoint(src)
    if fuse and hasattr(model, "fuse"):
        head = head_of(model)
        if getattr(head, "one2one_cv2", None) is not None:
            model.end2end = True  # keep the one-to-one (NMS-free) head; Ultralytics' fuse() drops the unused one
        model.fuse(verbose=False)

    state = {k: v for k, v in model.state_dict().items() if not k.endswith("num_batches_tracked")}
    target = {"f16": torch.float16, "f32": torch.float32}[dtype]
    tensors = {}
    for k, v in state.items():
        v = v.detach().cpu()
        if v.is_floating_point():
            v = v.to(target)
        tensors[k] = v.contiguous().numpy()

    md = build_metadata(src, ckpt, model, state)
    write_safetensors(out, tensors, md)
    return md


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description="Convert an Ultralytics YOLO .pt checkpoint to yolo-safetensors/1.")
    p.add_argument("model", type=Path, help="Ultralytics checkpoint, e.g. yolo26n.pt or runs/detect/train/weights/best.pt")
    p.add_argument("-o", "--output", type=Path, help="output file (default: MODEL.safetensors next to MODEL.pt)")
    p.add_argument("--dtype", choices=("f16", "f32"), default="f16", help="dtype of floating-point tensors (default f16)")
    p.add_argument(
        "--fuse",
        action="store_true",
        help="fold BatchNorm into convs and drop the head branch unused at inference (end-to-end models keep one-to-one)",
    )
    a = p.parse_args(argv)
    if not a.model.is_file():
        sys.exit(f"no such file: {a.model}")
    out = a.output or a.model.with_suffix(".safetensors")
    md = convert(a.model, out, a.dtype, a.fuse)
    n = len(json.loads(md["names"]))
    print(f"{out}: task={md['task']} classes={n} end2end={md['end2end']} imgsz={md['imgsz']}"
          + (f" bn_eps={md['bn_eps']}" if "bn_eps" in md else " (BatchNorm folded)"))


if __name__ == "__main__":
    main()
