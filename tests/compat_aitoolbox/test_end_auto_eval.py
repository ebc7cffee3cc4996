"""``TrainLoop(end_auto_eval=...)``: True, False, or an interval of epochs, as AIToolbox."""

from __future__ import annotations

import pytest
import torch
from aitb_helpers import MyNeuralModel, dataset
from torch import nn
from torch.utils.data import DataLoader

from scramjet.compat.aitoolbox.torchtrain.callbacks.abstract import AbstractCallback
from scramjet.compat.aitoolbox.torchtrain.train_loop import TrainLoop


class ValLossNow(AbstractCallback):
    """At each epoch end: the epoch, how many losses the history holds, and the mean
    validation loss per sample of the model as it is now, computed here."""

    def __init__(self) -> None:
        super().__init__("val loss now")
        self.seen: list[tuple[int, int, int, float]] = []

    def on_epoch_end(self) -> None:
        loop = self.train_loop_obj
        total, count = 0.0, 0
        with torch.no_grad():
            for x, y in loop.validation_loader:
                total += nn.functional.cross_entropy(loop.model(x), y, reduction="sum").item()
                count += len(y)
        history = loop.train_history
        self.seen.append(
            (loop.epoch, len(history["loss"]), len(history["accumulated_loss"]), total / count)
        )


def _fit(end_auto_eval: bool | int) -> tuple[TrainLoop, ValLossNow]:
    torch.manual_seed(0)
    model = MyNeuralModel()
    loop = TrainLoop(
        model,
        DataLoader(dataset(40, 0), batch_size=8),
        DataLoader(dataset(16, 1), batch_size=8),
        DataLoader(dataset(16, 2), batch_size=8),
        torch.optim.SGD(model.parameters(), lr=0.1),
        nn.CrossEntropyLoss(),
        end_auto_eval=end_auto_eval,
    )
    probe = ValLossNow()
    loop.fit(num_epochs=5, callbacks=[probe])
    return loop, probe


def test_an_interval_evaluates_every_nth_epoch_from_the_first():
    loop, probe = _fit(2)
    assert [(e, n_loss, n_acc) for e, n_loss, n_acc, _ in probe.seen] == [
        (0, 1, 1), (1, 1, 2), (2, 2, 3), (3, 2, 4), (4, 3, 5)
    ]  # fmt: skip
    history = loop.train_history
    expected = [probe.seen[e][3] for e in (0, 2, 4)]  # the weights of those epochs' ends
    assert history["val_loss"] == pytest.approx(expected, rel=1e-5)
    assert len(history["train_end_test_loss"]) == 1


def test_false_records_only_the_accumulated_loss():
    loop, _ = _fit(False)
    history = loop.train_history
    assert len(history["accumulated_loss"]) == 5
    assert not history.get("loss") and not history.get("val_loss")
    assert not history.get("train_end_test_loss")


def test_true_evaluates_every_epoch():
    loop, probe = _fit(True)
    assert loop.train_history["val_loss"] == pytest.approx([s[3] for s in probe.seen], rel=1e-5)
    assert len(loop.train_history["loss"]) == 5


@pytest.mark.parametrize("bad", [0, -1, 1.5, "yes"])
def test_a_bad_value_says_what_is_accepted(bad):
    with pytest.raises(ValueError, match=r"end_auto_eval must be True, False or an epoch interval"):
        TrainLoop(MyNeuralModel(), [], None, None, None, None, end_auto_eval=bad)


def test_the_loss_passes_are_named_in_the_progress_lines(capsys):
    """The epoch-end train-set loss pass shows its epoch and its name, not "epoch 1 eval"."""
    _fit(True)
    out = capsys.readouterr()
    lines = [line for line in (out.out + out.err).replace("\r", "\n").splitlines() if line]
    assert any(line.startswith("epoch 3/5 train-set loss 5/5") for line in lines), lines
    assert any(line.startswith("epoch 5/5 test-set loss 2/2") for line in lines), lines
    second = next(i for i, line in enumerate(lines) if line.startswith("epoch 2/5"))
    assert not [line for line in lines[second:] if line.startswith("epoch 1/5")]
