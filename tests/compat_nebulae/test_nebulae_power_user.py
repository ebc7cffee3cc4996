"""A nebulae code base run with only its imports changed: behaviours that differed."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import pytest
import torch

from scramjet.compat.nebulae import DashBoard
from scramjet.compat.nebulae.cockpit import CPU, Engine


def test_cpu_engine_ignores_ngpus_as_nebulae_documents(tmp_path: Path) -> None:
    # nebulae: "ngpus ... doesn't work when device is CPU"; scripts pass
    # torch.cuda.device_count(), which is 0 on a machine without a GPU.
    engine = Engine(device=CPU, ngpus=0)
    assert engine.device == torch.device("cpu")
    assert engine.gpus == []


def test_gpu_engine_still_refuses_zero_gpus() -> None:
    with pytest.raises(ValueError, match="ngpus must be an int >= 1"):
        Engine(device="GPU", ngpus=0)


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def test_dashboard_interval_only_thins_the_printed_lines_not_the_logged_values(
    tmp_path: Path,
) -> None:
    # nebulae read the gauge every mile and displayed every `interval` miles; the
    # tachograph (CSV) held every mile.
    out = io.StringIO()
    db = DashBoard(log_path=str(tmp_path / "log"), format={"loss": (".3f", "raw")}, file=out)
    for mile in range(6):
        db.gauge({"loss": float(mile)}, mile, 0, 6, "train", interval=3)
    db.log(gauge=False, tachograph=True)
    db.close()
    values = [float(r["value"]) for r in _rows(tmp_path / "log" / "loss.csv")]
    assert values == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    printed = [line.split(" | ")[0] for line in out.getvalue().splitlines()]
    assert printed == ["train epoch 1 3/6", "train epoch 1 6/6"]


def test_dashboard_interval_is_checked_with_its_value_named() -> None:
    db = DashBoard(file=io.StringIO())
    try:
        with pytest.raises(ValueError, match=r"interval must be an int >= 1.*received 0"):
            db.gauge({"loss": 1.0}, 0, 0, 4, "train", interval=0)
    finally:
        db.close()


def _labels_pack(tmp_path: Path, n: int = 6) -> Path:
    import numpy as np
    from PIL import Image

    from scramjet.compat.nebulae.fuel import FuelGenerator

    raw = tmp_path / "raw"
    raw.mkdir()
    for i in range(n):
        Image.fromarray(np.full((4, 4, 3), i, np.uint8)).save(raw / f"{i}.png")
    rows = "".join(f"{i}.png\t{i}\n" for i in range(n))
    (raw / "list.csv").write_text("image\tlabel\n" + rows)
    dst = tmp_path / "train.hdf5"
    fg = FuelGenerator(str(raw), "list.csv", ["int64"], False)
    fg.generate(str(dst), 4, 4, encode="PNG", progress=False, workers=0)
    return dst


def test_multiverse_sync_of_one_tank_leaves_its_batches_unread(tmp_path: Path) -> None:
    from scramjet.compat.nebulae import Multiverse
    from scramjet.compat.nebulae.fuel import depot

    data = _labels_pack(tmp_path)
    make = lambda: depot.Tank(str(data), {"label": "int64"}, batch_size=2, seed=5)  # noqa: E731
    tank, twin = make(), make()
    mv = Multiverse(lambda m: None, 1).init()
    net = torch.nn.Linear(2, 2)
    synced, same = mv.sync(net, tank)  # nebulae: sync(models, data) with one Tank
    assert synced is net and same is tank
    assert tank.epoch == 0  # the check read no batch: the first epoch is still to come
    assert tank.next()["label"].tolist() == twin.next()["label"].tolist()


def test_multiverse_sync_returns_models_then_tanks_as_one_tuple(tmp_path: Path) -> None:
    from scramjet.compat.nebulae import Multiverse
    from scramjet.compat.nebulae.fuel import depot

    data = _labels_pack(tmp_path)
    train = depot.Tank(str(data), {"label": "int64"}, batch_size=2)
    dev = depot.Tank(str(data), {"label": "int64"}, batch_size=3, shuffle=False)
    mv = Multiverse(lambda m: None, 1).init()
    net, other = torch.nn.Linear(2, 2), torch.nn.Linear(2, 1)
    a, t1, t2 = mv.sync(net, (train, dev))  # as nebulae: tuple(models) + tuple(data)
    assert (a, t1, t2) == (net, train, dev)
    m1, m2, t = mv.sync([net, other], [dev])
    assert (m1, m2, t) == (net, other, dev)
    assert mv.sync(net) is net and mv.sync([net, other]) == [net, other]


def craft_attributes_universe(mv: Any) -> dict[str, Any]:
    """Run in each Multiverse process: the craft's attributes through the synced model."""
    from scramjet.compat.nebulae.astro import dock

    class Net(dock.Craft):
        def __init__(self) -> None:
            super().__init__("cnn")
            self.fc = dock.Dense(3, 1)

        def run(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(x)

        def describe(self) -> str:
            return f"{self.scope} with {self.fc.out_features} output"

    mv.init()
    net = mv.sync(Net())
    return {
        "wrapper": type(net).__mro__[1].__name__,
        "scope": net.scope,
        "fc_is_inner": net.fc is net.module.fc,
        "describe": net.describe(),
        "out": tuple(net(torch.ones(2, 3)).shape),
    }


@pytest.mark.slow
@pytest.mark.distributed
def test_synced_craft_keeps_its_attributes_across_two_processes() -> None:
    import sys

    from scramjet.compat.nebulae import Multiverse

    sys.path.insert(0, str(Path(__file__).parent))
    from test_nebulae_power_user import craft_attributes_universe as universe

    seen = Multiverse(universe, 2)()
    assert seen == {
        "wrapper": "DistributedDataParallel",
        "scope": "cnn",
        "fc_is_inner": True,
        "describe": "cnn with 1 output",
        "out": (2, 1),
    }


def test_tank_refuses_a_yes_no_value_as_its_batch_size(tmp_path: Path) -> None:
    from scramjet.compat.nebulae.fuel import depot

    data = _labels_pack(tmp_path)
    with pytest.raises(ValueError, match=r"batch_size must be a positive int, got bool True"):
        depot.Tank(str(data), {"label": "int64"}, batch_size=True)  # type: ignore[arg-type]


def test_generate_refuses_a_fractional_size_instead_of_rounding_it(tmp_path: Path) -> None:
    from scramjet.compat.nebulae.fuel import FuelGenerator

    data = _labels_pack(tmp_path)
    raw = data.parent / "raw"
    fg = FuelGenerator(str(raw), "list.csv", ["int64"], False)
    with pytest.raises(ValueError, match=r"height must be a positive int, got 4\.5"):
        fg.generate(str(tmp_path / "other.hdf5"), 4.5, 4, progress=False, workers=0)  # type: ignore[arg-type]
    assert not (tmp_path / "other.hdf5").exists()
