"""A text-classification fine-tuning project, as one user would write it.

A word-level tokenizer trained locally, a small BERT classifier, ``DataCollatorWithPadding``
batches, the Trainer with weight-decay groups, a warm-up schedule from placeholders,
accumulation, clipping and bf16, an Experiment with the MLflow and TensorBoard loggers,
custom metrics per step and per epoch, predictions, result packages and the ``runs``
command. The fast tests pin what such a user tripped on; the slow one runs the journey
end to end and checks every number against a hand-written loop and every logger against
``metrics.csv``.
"""

from __future__ import annotations

import csv
import functools
import json
import math
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

from scramjet import Trainer
from scramjet.callbacks import TrainerCallback
from scramjet.cli import main
from scramjet.tracking import Experiment, list_runs

# ----------------------------------------------------------------------------- small data


def _blobs(n: int = 48) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 4, generator=g)
    return list(zip(x, (x.sum(dim=1) > 0).long()))


def _csv_rows(run_dir: Path) -> list[dict[str, str]]:
    with open(run_dir / "metrics.csv", newline="") as f:
        return list(csv.DictReader(f))


# ----------------------------------------------------------------------------- trainer.log


def test_log_accepts_numpy_scalars_and_one_element_arrays(tmp_path: Path) -> None:
    """Accuracy from NumPy (np.float32, an np.int64 count, a one-element array) is a number:
    trainer.log refused it with 'expected a number'."""
    values: dict[str, Any] = {
        "f32": np.float32(0.5),
        "i64": np.int64(3),
        "arr": np.array([0.75], dtype=np.float32),
    }

    class LogNumpy(TrainerCallback):
        def on_optimizer_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
            trainer.log_dict({f"step_{k}": v for k, v in values.items()})

        def on_eval_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
            trainer.log_dict({f"epoch_{k}": v for k, v in values.items()})

    model = nn.Linear(4, 2)
    exp = Experiment("np", "log", root=tmp_path, checkpoint=None, log_every_n_steps=1)
    trainer = Trainer(
        model,
        nn.CrossEntropyLoss(),
        torch.optim.SGD(model.parameters(), lr=0.1),
        callbacks=[exp, LogNumpy()],
        seed=0,
    )
    data = _blobs()
    trainer.train(data, 1, eval_dataset=data, per_device_batch_size=24)
    got = {(r["scope"], r["name"]): float(r["value"]) for r in _csv_rows(exp.run_dir)}
    for scope in ("step", "epoch"):
        assert got[(scope, f"{scope}_f32")] == 0.5
        assert got[(scope, f"{scope}_i64")] == 3.0
        assert got[(scope, f"{scope}_arr")] == 0.75
    assert trainer.run_history.get_latest_metric("epoch_i64") == 3.0


def test_log_still_refuses_what_is_not_one_number() -> None:
    model = nn.Linear(4, 2)
    trainer = Trainer(model, nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), lr=0.1))
    with pytest.raises(TypeError, match=r"type bool_?; expected a number .*float\(value\)"):
        trainer.log("flag", np.bool_(True))
    with pytest.raises(TypeError, match=r"type ndarray; expected a number"):
        trainer.log("many", np.zeros(3))
    with pytest.raises(TypeError, match=r"type str; expected a number"):
        trainer.log("text", "0.5")


# ----------------------------------------------------------------------------- defects left to others


def _grouped_adamw(model: nn.Module, decay: float) -> torch.optim.AdamW:
    """The usual fine-tuning groups: decay on weights, none on biases and LayerNorm."""
    groups: list[dict[str, Any]] = [
        {"params": [], "weight_decay": decay},
        {"params": [], "weight_decay": 0.0},
    ]
    for name, p in model.named_parameters():
        no_decay = name.endswith("bias") or isinstance(model.get_submodule(name[:-7]), nn.LayerNorm)
        groups[1 if no_decay else 0]["params"].append(p)
    return torch.optim.AdamW(groups, lr=1e-3)  # AdamW's own default weight_decay: 0.01


def test_recorded_weight_decay_is_what_the_param_groups_used(tmp_path: Path) -> None:
    model = nn.Sequential(nn.Linear(4, 8), nn.LayerNorm(8), nn.Linear(8, 2))
    exp = Experiment(
        "wd", "groups", root=tmp_path, hyperparams={"weight_decay": 0.1}, checkpoint=None
    )
    trainer = Trainer(
        model, nn.CrossEntropyLoss(), _grouped_adamw(model, 0.1), callbacks=[exp], seed=0
    )
    trainer.train(_blobs(), 1, per_device_batch_size=24)
    recorded = json.loads((exp.run_dir / "hyperparams.json").read_text())["optimizer"]
    report = (exp.run_dir / "report.html").read_text()
    assert "the run trained with 0.01" not in report, "a false contradiction warning"
    assert recorded["weight_decay"] == {"per_group": [0.1, 0.0]}  # was AdamW's default 0.01


def test_predict_and_evaluate_after_train_batch_with_its_collate_fn() -> None:
    def pad(batch: list[tuple[torch.Tensor, int]]) -> tuple[torch.Tensor, torch.Tensor]:
        width = max(len(x) for x, _ in batch)
        xs = torch.stack([nn.functional.pad(x, (0, width - len(x))) for x, _ in batch])
        return xs[:, :4], torch.tensor([y for _, y in batch])

    g = torch.Generator().manual_seed(0)
    data = [(torch.randn(4 + i % 3, generator=g), i % 2) for i in range(24)]  # ragged rows
    model = nn.Linear(4, 2)
    trainer = Trainer(
        model, nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), lr=0.1), callbacks=[]
    )
    trainer.train(data, 1, per_device_batch_size=8, collate_fn=pad)
    # evaluate and predict batch with train()'s collate_fn when given none (they failed in
    # torch's default_collate), and with the one they are given otherwise
    assert trainer.predict(data).shape == (24, 2)
    trainer.evaluate(data)
    assert trainer.run_history.get_latest_metric("eval_loss_epoch") > 0
    with pytest.raises(RuntimeError, match="equal size"):
        trainer.predict(data, collate_fn=torch.utils.data.default_collate)


def test_runs_metrics_does_not_deny_a_metric_logged_per_step(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    class GradNorm(Trainer):
        def optimizer_step(self) -> None:
            norms = [p.grad.norm() for p in self.model.parameters() if p.grad is not None]
            self.log("grad_norm", torch.stack(norms).norm())
            super().optimizer_step()

    model = nn.Linear(4, 2)
    exp = Experiment("cli", "step", root=tmp_path, checkpoint=None)
    GradNorm(
        model, nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), lr=0.1), callbacks=[exp]
    ).train(_blobs(), 1, per_device_batch_size=24)
    assert any(r["name"] == "grad_norm" for r in _csv_rows(exp.run_dir))
    capsys.readouterr()
    assert main(["runs", str(tmp_path), "--metrics", "grad_norm"]) == 0
    err = capsys.readouterr().err
    assert "no run has a metric named 'grad_norm'" not in err


# ----------------------------------------------------------------------------- the journey


def _sentences(n: int, rng: random.Random) -> list[tuple[str, int]]:
    subjects = [
        ["the match", "the team", "the coach", "the striker"],
        ["the market", "the bank", "the stock", "the economy"],
        ["the laptop", "the phone", "the chip", "the robot"],
    ]
    verbs = [
        ["won the final", "scored twice", "lost at home"],
        ["rose sharply", "fell today", "cut rates"],
        ["got an update", "was released", "crashed again"],
    ]
    rows = []
    for i in range(n):
        y = i % 3
        when = rng.choice(["yesterday", "today", "again", ""])
        rows.append((f"{rng.choice(subjects[y])} {rng.choice(verbs[y])} {when}".strip(), y))
    rng.shuffle(rows)
    return rows


@pytest.mark.slow
def test_text_classification_journey_matches_a_hand_loop_and_every_logger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("mlflow")
    pytest.importorskip("tensorboard")
    from mlflow.tracking import MlflowClient
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
    from tokenizers.processors import TemplateProcessing
    from transformers import (
        BertConfig,
        BertForSequenceClassification,
        DataCollatorWithPadding,
        PreTrainedTokenizerFast,
        get_linear_schedule_with_warmup,
    )

    from scramjet.metrics import ClassificationResults
    from scramjet.schedulers import TrainerPlaceholderValues as P

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    rng = random.Random(0)
    train_rows, val_rows, test_rows = (_sentences(n, rng) for n in (240, 48, 48))

    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
    tok.train_from_iterator(
        [s for s, _ in train_rows], trainers.WordLevelTrainer(special_tokens=specials)
    )
    tok.post_processor = TemplateProcessing(
        single="[CLS] $A [SEP]",
        special_tokens=[(t, tok.token_to_id(t)) for t in ("[CLS]", "[SEP]")],
    )
    hf_tok = PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]",
        sep_token="[SEP]",
    )  # fmt: skip

    def encode(rows: list[tuple[str, int]]) -> list[dict[str, Any]]:
        return [dict(hf_tok(s), labels=y) for s, y in rows]

    train_ds, val_ds, test_ds = encode(train_rows), encode(val_rows), encode(test_rows)
    collate = DataCollatorWithPadding(hf_tok)
    config = BertConfig(
        vocab_size=hf_tok.vocab_size, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=64, num_labels=3,
        max_position_embeddings=32, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )  # fmt: skip

    def fresh() -> tuple[nn.Module, torch.optim.Optimizer]:
        torch.manual_seed(0)
        model = BertForSequenceClassification(config)
        skip = ("bias", "LayerNorm.weight")
        named = list(model.named_parameters())
        groups = [
            {
                "params": [p for n, p in named if not any(k in n for k in skip)],
                "weight_decay": 0.01,
            },
            {"params": [p for n, p in named if any(k in n for k in skip)], "weight_decay": 0.0},
        ]
        return model, torch.optim.AdamW(groups, lr=3e-3)

    schedule = functools.partial(
        get_linear_schedule_with_warmup,
        num_warmup_steps=P.NUM_UPDATE_STEPS_PER_EPOCH,
        num_training_steps=P.TOTAL_UPDATE_STEPS,
    )

    class TextTrainer(Trainer):
        def optimizer_step(self) -> None:
            norms = [p.grad.norm() for p in self.model.parameters() if p.grad is not None]
            self.log("grad_norm", torch.stack(norms).norm())
            super().optimizer_step()

    class Accuracy(TrainerCallback):
        def on_eval_epoch_start(self, trainer: Trainer, **kwargs: Any) -> None:
            self.right = self.seen = 0

        def on_eval_step_end(
            self, trainer: Trainer, batch: Any, batch_output: Any, **kw: Any
        ) -> None:
            hit = batch_output["model_outputs"].logits.argmax(-1) == batch["labels"]
            self.right += int(hit.sum())
            self.seen += len(hit)

        def on_eval_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
            trainer.log("eval_accuracy", np.float64(self.right / self.seen))

    epochs = 2
    model, opt = fresh()
    exp = Experiment(
        "txt", "bert", root="runs", loggers=("csv", "tensorboard", "mlflow"),
        hyperparams=config, log_every_n_steps=4, keep_best=1,
    )  # fmt: skip
    trainer = TextTrainer(model, None, opt, callbacks=[Accuracy(), exp], precision="bf16", seed=0)
    trainer.train(
        train_ds, epochs, eval_dataset=val_ds, per_device_batch_size=16,
        gradient_accumulation_steps=2, gradient_clip_norm=1.0, create_scheduler_fn=schedule,
        collate_fn=collate, train_dataloader_kwargs={"shuffle": False},
    )  # fmt: skip
    preds = trainer.predict(test_ds, collate_fn=collate).logits.argmax(-1)
    results = ClassificationResults(num_classes=3)(preds, torch.tensor([y for _, y in test_rows]))
    exp.log_results("test", results)

    # The same epochs by hand: same seed, same order, same arithmetic.
    hand_model, hand_opt = fresh()
    loader = torch.utils.data.DataLoader(train_ds, batch_size=16, collate_fn=collate)
    val_loader = torch.utils.data.DataLoader(val_ds, batch_size=16, collate_fn=collate)
    per_epoch = math.ceil(len(loader) / 2)
    sched = get_linear_schedule_with_warmup(hand_opt, per_epoch, per_epoch * epochs)
    expected: dict[tuple[str, int, str], float] = {}
    step = 0
    for _ in range(epochs):
        hand_model.train()
        batches, total, count = list(loader), 0.0, 0
        for w in range(0, len(batches), 2):
            window, losses = batches[w : w + 2], []
            for b in window:
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    loss = hand_model(**b).loss
                (loss / len(window)).backward()
                losses.append(loss.item())
                total, count = total + loss.item() * len(b["labels"]), count + len(b["labels"])
            nn.utils.clip_grad_norm_(hand_model.parameters(), 1.0)
            grads = [p.grad.norm() for p in hand_model.parameters() if p.grad is not None]
            step += 1
            expected[("step", step, "grad_norm")] = torch.stack(grads).norm().item()
            expected[("step", step, "lr")] = hand_opt.param_groups[0]["lr"]
            expected[("step", step, "train_loss")] = sum(losses) / len(losses)
            hand_opt.step()
            sched.step()
            hand_opt.zero_grad()
        hand_model.eval()
        vloss, vright, vseen = 0.0, 0, 0
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            for b in val_loader:
                out = hand_model(**b)
                vloss += out.loss.item() * len(b["labels"])
                vright += int((out.logits.argmax(-1) == b["labels"]).sum())
                vseen += len(b["labels"])
        expected[("epoch", step, "train_loss_epoch")] = total / count
        expected[("epoch", step, "eval_loss_epoch")] = vloss / vseen
        expected[("epoch", step, "eval_accuracy")] = vright / vseen

    rows = _csv_rows(exp.run_dir)
    got = {(r["scope"], int(r["step"]), r["name"]): float(r["value"]) for r in rows}
    assert got.keys() == expected.keys()
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, rel=1e-5, abs=1e-7), key
    for mine, theirs in zip(model.parameters(), hand_model.parameters()):
        assert torch.equal(mine, theirs)

    # Every logger holds what metrics.csv holds, under the same names.
    series: dict[str, list[tuple[int, float]]] = {}
    for (_, step, name), value in sorted(got.items(), key=lambda kv: kv[0][1]):
        series.setdefault(name, []).append((step, value))
    results_names = {f"test/{k}" for k, v in results.items() if isinstance(v, float)}
    run_id = json.loads((exp.run_dir / "run.json").read_text())["mlflow_run_id"]
    client = MlflowClient(tracking_uri=(tmp_path / "mlruns").as_uri())
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED" and run.info.run_name == exp.run_dir.name
    assert set(run.data.metrics) == set(series) | {"epoch"} | results_names
    for name, points in series.items():
        history = sorted((m.step, m.value) for m in client.get_metric_history(run_id, name))
        assert [s for s, _ in history] == [s for s, _ in points], name
        assert [v for _, v in history] == pytest.approx([v for _, v in points]), name
    events = EventAccumulator(str(exp.run_dir), size_guidance={"scalars": 0})
    events.Reload()
    assert set(events.Tags()["scalars"]) == set(series) | {"epoch"} | results_names
    for name, points in series.items():
        scalars = sorted((e.step, e.value) for e in events.Scalars(name))
        assert [s for s, _ in scalars] == [s for s, _ in points], name
        assert [v for _, v in scalars] == pytest.approx([v for _, v in points], rel=1e-6), name

    # The best checkpoint, the saved model, the results, the runs command.
    index = json.loads((exp.run_dir / "checkpoints" / "index.json").read_text())
    losses = [v for (s, _, n), v in got.items() if n == "eval_loss_epoch"]
    best = min(index["checkpoints"], key=lambda c: c["metrics"]["eval_loss_epoch"])
    assert index["best"] == best["file"] and best["metrics"]["eval_loss_epoch"] == min(losses)
    trainer.unwrapped_model.save_pretrained(tmp_path / "saved")
    reloaded = BertForSequenceClassification.from_pretrained(tmp_path / "saved").eval()
    batch = collate(test_ds[:8])
    batch.pop("labels")
    with torch.no_grad():
        assert torch.equal(reloaded(**batch).logits, trainer.unwrapped_model.eval()(**batch).logits)
    saved = json.loads((exp.run_dir / "results" / "test.json").read_text())
    assert saved["accuracy"] == pytest.approx(
        float((preds == torch.tensor([y for _, y in test_rows])).float().mean())
    )
    assert main(["runs", "runs", "--metrics", "eval_accuracy,test/f1_macro"]) == 0


# ----------------------------------------------------------------------------- MLflow set-up errors


def _mlflow_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, uri: str) -> None:
    pytest.importorskip("mlflow")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.chdir(tmp_path)
    model = nn.Linear(4, 2)
    exp = Experiment("mlf", "uri", root=tmp_path, loggers=("csv", "mlflow"), checkpoint=None)
    trainer = Trainer(
        model, nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), lr=0.1), callbacks=[exp]
    )
    trainer.train(_blobs(), 1, per_device_batch_size=24)


def test_an_mlflow_server_that_refuses_connections_fails_the_run_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MLflow's client retried a refused server for minutes, silently, before train() began."""
    import socket
    import time

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    start = time.monotonic()
    with pytest.raises(Exception, match=r"does not accept connections.*MLFLOW_TRACKING_URI"):
        _mlflow_run(tmp_path, monkeypatch, f"http://127.0.0.1:{port}")
    assert time.monotonic() - start < 10
    # The run folder says why it ended (it held only metrics files, so no listing showed it).
    (run,) = list_runs(tmp_path)
    assert run["status"] == "failed", run
    info = json.loads((run["run_dir"] / "run.json").read_text())
    assert "does not accept connections" in info["error"] and info["finished"] >= info["started"]


def test_a_store_mlflow_cannot_open_names_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    try:
        MlflowClient(tracking_uri=uri)
    except Exception:
        pass
    else:
        pytest.skip("this MLflow installation opens database stores")
    with pytest.raises(Exception, match=r"cannot open the tracking store.*pip install mlflow"):
        _mlflow_run(tmp_path, monkeypatch, uri)
