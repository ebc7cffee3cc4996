"""Attention heatmaps (one PNG per validation example) and the AIToolbox NLP helpers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image
from s3_helpers import S3Server
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from scramjet import Trainer
from scramjet.compat.aitoolbox.nlp.core.core import find_sub_list, normalize_string
from scramjet.compat.aitoolbox.nlp.core.vocabulary import Vocabulary
from scramjet.compat.aitoolbox.nlp.experiment_evaluation.attention_heatmap import (
    DPI,
    AttentionHeatmapCallback,
    heatmap_figure_size,
)
from scramjet.compat.aitoolbox.nlp.experiment_evaluation.NLP_metrics import (
    BLEUCorpusScoreMetric,
    F1TextMetric,
)
from scramjet.tracking import Experiment


class ToySeq2Seq(nn.Module):
    """Scores source tokens; its 'attention' is a softmax over source positions per target step."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(10, 4)
        self.out = nn.Linear(4, 2)

    def forward(self, src: torch.Tensor) -> torch.Tensor:
        return self.out(self.emb(src).mean(1))

    def attention(self, src: torch.Tensor, n_target: int) -> torch.Tensor:
        keys = self.emb(src)  # [B, S, 4]
        queries = keys[:, :1, :].expand(-1, n_target, -1) + torch.arange(n_target)[None, :, None]
        return torch.softmax(queries @ keys.transpose(1, 2), dim=-1)  # [B, T, S]


def attention_fn(model: nn.Module, batch: Any) -> tuple[Any, list[list[str]], list[list[str]]]:
    src, _ = batch
    lengths = [3 + int(i) % 3 for i in src[:, 0]]  # real source lengths: 3, 4 or 5 tokens
    sources = [[f"s{j}" for j in range(n)] for n in lengths]
    targets = [["t0", "t1"] for _ in lengths]
    return model.attention(src, 2), sources, targets  # type: ignore[operator]


def data(n: int) -> TensorDataset:
    g = torch.Generator().manual_seed(n)
    return TensorDataset(
        torch.randint(0, 10, (n, 5), generator=g), torch.randint(0, 2, (n,), generator=g)
    )


def train(callback: AttentionHeatmapCallback, extra: list[Any], epochs: int) -> Trainer:
    model = ToySeq2Seq()
    trainer = Trainer(
        model,
        nn.CrossEntropyLoss(),
        torch.optim.SGD(model.parameters(), lr=0.1),
        callbacks=[*extra, callback],
    )
    trainer.train(
        data(8),
        num_epochs=epochs,
        per_device_batch_size=4,
        eval_dataset=DataLoader(data(5), batch_size=2),
    )
    return trainer


def test_one_png_per_validation_example_sized_by_its_tokens(tmp_path: Path) -> None:
    callback = AttentionHeatmapCallback(attention_fn, output_dir=tmp_path / "maps")
    train(callback, [], epochs=2)
    for epoch in (1, 2):
        pngs = sorted((tmp_path / "maps" / f"epoch_{epoch}").glob("*.png"))
        assert len(pngs) == 5  # the 5 validation examples
    src = data(5).tensors[0]
    for path in sorted((tmp_path / "maps" / "epoch_2").glob("*.png")):
        n_source = 3 + int(src[int(path.stem.split("_")[1]), 0]) % 3
        w, h = heatmap_figure_size(n_source, 2)
        with Image.open(path) as image:
            assert image.format == "PNG"
            assert image.size == (round(w * DPI), round(h * DPI))
            assert len(np.unique(np.asarray(image.convert("L")))) > 10  # a drawn heatmap, not blank


def test_heatmaps_go_into_the_run_folder_and_its_storage(s3: S3Server, tmp_path: Path) -> None:
    bucket = s3.new_bucket()
    exp = Experiment(
        "nlp",
        "attn",
        root=tmp_path / "runs",
        storage=f"s3://{bucket}",
        save_script=False,
        sync_every_s=0,
        checkpoint=None,
    )
    callback = AttentionHeatmapCallback(attention_fn, experiment=exp, max_examples=3)
    train(callback, [exp], epochs=1)
    run = exp.run_dir
    maps = run / "results" / "attention_heatmaps"
    local = sorted(p.relative_to(run).as_posix() for p in maps.rglob("*.png"))
    assert local == [f"results/attention_heatmaps/epoch_1/example_{i}.png" for i in range(3)]
    keys = s3.list_keys(bucket)
    for rel in local:
        assert keys[f"nlp/{run.name}/{rel}"] == (run / rel).stat().st_size


def test_callback_needs_one_destination(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="exactly one destination"):
        AttentionHeatmapCallback(attention_fn)


def test_nlp_helpers() -> None:
    vocab = Vocabulary("v")
    vocab.add_sentence(["the", "cat", "sat"])
    ids = vocab.convert_sent2idx_sent(["the", "dog", "sat"])
    assert ids == [2, 4, 1, 6, 3]
    assert vocab.convert_idx_sent2sent(ids, rm_default_tokens=True) == ["the", "OOV", "sat"]
    assert find_sub_list([3, 4], [1, 3, 4, 5]) == (1, 2)
    assert normalize_string("Héllo, World!") == "hello world !"
    assert F1TextMetric([["a", "cat"]], [["the", "cat", "sat"]]).get_metric() == pytest.approx(
        100 * 2 * (1 / 2) * 1 / (1 / 2 + 1)
    )
    # Corpus BLEU: 4/4, 2/3, 1/2, 0/1 precisions -> the 4-gram has no match -> 0.
    assert BLEUCorpusScoreMetric([["a", "b", "c", "d"]], [["a", "b", "c", "x"]]).get_metric() == 0.0
    assert (
        BLEUCorpusScoreMetric([["a", "b", "c", "d", "e"]], [["a", "b", "c", "d", "e"]]).get_metric()
        == 1.0
    )
