#!/usr/bin/env bash
# Checks that ONNX Runtime training (ORTModule) works on CPU with a pinned torch, and that
# scramjet's ONNXRUNTIME backend stays active with it. See docs/acceleration.md,
# "ONNX Runtime findings".
#
#   bash benchmarks/onnxruntime_pair.sh        # TORCH=2.4.1 ORT=onnxruntime-training-cpu==1.19.2
#
# Creates .bench/ort-venv (about 5 GB: PyPI's Linux torch wheels pull the CUDA libraries),
# installs the pair, builds ORTModule's C++ extensions (about 6 min on 2 cores; needs g++),
# then trains a small MLP for 20 SGD steps with ORTModule and with eager PyTorch from the
# same weights and data, and prints the differences and the step-time ratio.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.bench/ort-venv"
TORCH="${TORCH:-2.4.1}"
ORT="${ORT:-onnxruntime-training-cpu==1.19.2}"
PY="$VENV/bin/python"

if [ ! -x "$PY" ]; then
    mkdir -p "$ROOT/.bench"
    "${PYTHON:-python3}" -m venv "$VENV"
fi
echo "torch==$TORCH" > "$VENV/pin.txt"
"$PY" -m pip install -q -c "$VENV/pin.txt" "torch==$TORCH" "$ORT" setuptools
# scramjet's runtime deps, torch held at the pinned version; scramjet itself via PYTHONPATH
"$PY" -m pip install -q -c "$VENV/pin.txt" numpy rich h5py pillow fsspec matplotlib torchmetrics
# ORTModule refuses to start until its torch C++ extensions are built against this torch
# (same as `python -m torch_ort.configure`).
if ! ls "$VENV"/lib/python3*/site-packages/onnxruntime/training/ortmodule/torch_cpp_extensions/torch_interop_utils*.so >/dev/null 2>&1; then
    (cd "$VENV" && "$PY" -m onnxruntime.training.ortmodule.torch_cpp_extensions.install)
fi

export PYTHONPATH="$ROOT/src${PYTHONPATH:+:$PYTHONPATH}"
export ORTMODULE_LOG_LEVEL="${ORTMODULE_LOG_LEVEL:-ERROR}"
"$PY" - <<'EOF'
import copy, time, warnings
import torch, onnxruntime
from onnxruntime.training.ortmodule import ORTModule

torch.manual_seed(0)

def mlp():
    return torch.nn.Sequential(
        torch.nn.Linear(64, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 10))

def train(model, params, xs, ys):
    opt = torch.optim.SGD(params, lr=0.05)
    losses, grads, times = [], [], []
    for x, y in zip(xs, ys):
        t = time.perf_counter()
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t)
        losses.append(loss.item())
        grads.append([p.grad.clone() for p in params])
    return losses, grads, times

eager = mlp()
inner = copy.deepcopy(eager)
ort = ORTModule(inner)
xs = [torch.randn(128, 64) for _ in range(20)]
ys = [torch.randint(0, 10, (128,)) for _ in range(20)]
le, ge, _ = train(eager, list(eager.parameters()), xs, ys)
lo, go, to = train(ort, list(inner.parameters()), xs, ys)
print(f"torch {torch.__version__}, onnxruntime {onnxruntime.__version__}")
print(f"20 SGD steps: max|loss diff| {max(abs(a - b) for a, b in zip(le, lo)):.2e}, "
      f"max|grad diff| {max((a - b).abs().max().item() for sa, sb in zip(ge, go) for a, b in zip(sa, sb)):.2e}, "
      f"max|weight diff| {max((a - b).abs().max().item() for a, b in zip(eager.parameters(), inner.parameters())):.2e}")
print(f"first ORTModule step (export + session build): {to[0]:.2f} s")

# step time: 3 interleaved rounds of 50 steps each, first 5 of each round dropped
te, to = [], []
for _ in range(3):
    te += train(eager, list(eager.parameters()), xs[:1] * 50, ys[:1] * 50)[2][5:]
    to += train(ort, list(inner.parameters()), xs[:1] * 50, ys[:1] * 50)[2][5:]
med = lambda v: sorted(v)[len(v) // 2]
print(f"median step: eager {med(te) * 1e3:.2f} ms, ORTModule {med(to) * 1e3:.2f} ms, "
      f"ORTModule/eager = {med(to) / med(te):.2f}")

import scramjet.accel as sa
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    model = sa.accelerate_model(mlp(), backends=["ONNXRUNTIME", "PYTORCH"])
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for x, y in zip(xs[:5], ys[:5]):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
acc = [str(w.message) for w in caught if issubclass(w.category, sa.AccelerationWarning)]
print(f"scramjet accelerate_model(backends=['ONNXRUNTIME', 'PYTORCH']) after 5 steps: "
      f"active_backend={sa.active_backend(model)}, AccelerationWarnings={acc or 'none'}")
EOF
