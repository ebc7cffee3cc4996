"""The progress bar on a real terminal (tmux): an evaluation bar, and every final frame once."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "dashboard"))
from tmux_helpers import run_in_tmux, tmux_available

SCRIPT = """
import sys, time
import torch
from torch.utils.data import TensorDataset
from scramjet import Trainer

EVAL_DELAY = float(sys.argv[1])

class SlowEval(Trainer):
    def calculate_eval_batch_loss(self, batch):
        time.sleep(EVAL_DELAY)
        return super().calculate_eval_batch_loss(batch)

torch.manual_seed(0)
model = torch.nn.Linear(4, 2)
x, y = torch.randn(64, 4), torch.randint(0, 2, (64,))
trainer = SlowEval(model, torch.nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), lr=0.1))
trainer.train(TensorDataset(x, y), num_epochs=2, per_device_batch_size=8,
              eval_dataset=TensorDataset(x[:60], y[:60]))
print("run over")
"""

pytestmark = pytest.mark.skipif(not tmux_available(), reason="needs tmux")
# The pane's real size: a COLUMNS inherited from the test process would narrow rich's view.
SIZE = {"COLUMNS": "120", "LINES": "40"}


def _script(tmp_path: Path) -> Path:
    path = tmp_path / "train_slow_eval.py"
    path.write_text(SCRIPT)
    return path


def test_the_screen_shows_an_evaluation_bar_while_evaluating(tmp_path: Path) -> None:
    # 60 eval samples in batches of 8: 8 batches of 0.6 s. Capture while it runs.
    running = r"epoch 1/2 eval [1-7]/8 \| loss [\d.]+ \| [\d,]+ samples/s \| ETA \d+s"
    screen = run_in_tmux(
        [sys.executable, str(_script(tmp_path)), "0.6"], wait_for=running, timeout=90, env=SIZE
    )
    capture = tmp_path / "progress_during_evaluation.txt"
    capture.write_text(screen)
    print(f"tmux capture: {capture}")
    assert re.search(running, screen), screen
    # The finished training bar of the epoch stays above, drawn once.
    train = re.findall(r"epoch 1/2 train 8/8 \| loss [\d.]+ \| [\d,]+ samples/s \| ETA 0s", screen)
    assert len(train) == 1, screen
    assert "run over" not in screen


def test_every_stage_leaves_exactly_one_final_frame(tmp_path: Path) -> None:
    screen = run_in_tmux([sys.executable, str(_script(tmp_path)), "0.0"], timeout=90, env=SIZE)
    assert "run over" in screen, screen
    for epoch in (1, 2):
        for stage, total in (("train", 8), ("eval", 8)):
            pattern = rf"epoch {epoch}/2 {stage} {total}/{total} \| loss [\d.]+ \|"
            assert len(re.findall(pattern, screen)) == 1, (pattern, screen)
    metric_lines = re.findall(r"^epoch \d \| eval_loss_epoch", screen, flags=re.M)
    assert len(metric_lines) == 2, screen
