"""Seed 004's README example runs with only its imports changed (generated MNIST stand-in)."""

from __future__ import annotations

import hashlib
import math
import os
import re
import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
EXAMPLE = EXAMPLES / "pytorch_accelerated_mnist.py"
METRICS = re.compile(r"^epoch (\d+) \| eval_loss_epoch: ([\d.]+) \| train_loss_epoch: ([\d.]+)$")
# SHA-256 of the README example's code without its import lines, comments, blank lines and
# whitespace (computed from pytorch-accelerated's README with the same normalisation).
README_CODE_SHA256 = "d3e2af058e6bc3d6979abdfe4c92352f2d98015d8adbf33699de932420d65b3e"


def _code_without_imports(text: str) -> list[str]:
    lines = []
    for line in text.splitlines():
        squeezed = "".join(line.split())
        if squeezed and not squeezed.startswith(("#", "import", "from")):
            lines.append(squeezed)
    return lines


def test_only_the_imports_differ_from_the_readme() -> None:
    source = EXAMPLE.read_text()
    code = _code_without_imports(source)
    assert hashlib.sha256("\n".join(code).encode()).hexdigest() == README_CODE_SHA256, (
        "the example's code (imports aside) must stay the README's, line for line"
    )
    imports = [line for line in source.splitlines() if line.startswith(("import", "from"))]
    assert "from scramjet import Trainer" in imports
    assert "from generated_mnist import MNIST, transforms" in imports
    assert not any("pytorch_accelerated" in line or "torchvision" in line for line in imports)
    # The check above can fail: a one-character change to the code changes the digest.
    changed = source.replace("lr=0.001", "lr=0.002")
    digest = hashlib.sha256("\n".join(_code_without_imports(changed)).encode()).hexdigest()
    assert digest != README_CODE_SHA256


def test_readme_example_runs_and_learns(tmp_path: Path) -> None:
    """The example's own text, with the README's split sizes and epoch count made smaller."""
    source = EXAMPLE.read_text()
    for original, small in (("[55000, 5000]", "[3300, 300]"), ("num_epochs=8", "num_epochs=2")):
        assert source.count(original) == 1, original
        source = source.replace(original, small)
    script = tmp_path / "train_mnist.py"
    script.write_text(source)
    env = {
        **os.environ,
        "SCRAMJET_EXAMPLE_SAMPLES": "3600",
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": os.pathsep.join([str(EXAMPLES), os.environ.get("PYTHONPATH", "")]),
    }
    out = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    rows = [m.groups() for line in out.stdout.splitlines() if (m := METRICS.match(line))]
    assert [r[0] for r in rows] == ["1", "2"], out.stdout
    eval_losses = [float(r[1]) for r in rows]
    train_losses = [float(r[2]) for r in rows]
    chance = math.log(10)
    assert train_losses[1] < train_losses[0] < chance
    assert eval_losses[1] < eval_losses[0]
    assert eval_losses[1] < 0.7 * chance, "well below chance level after two epochs"
    assert "samples/s" in out.stdout, "the default progress bar reports throughput"
