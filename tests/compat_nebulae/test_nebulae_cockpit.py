"""nebulae's Cockpit and Kit names: Engine, GPUtil, TimeMachine, Multiverse."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from scramjet.checkpoint import CheckpointWriteError, CorruptCheckpointError
from scramjet.compat.nebulae import Engine, GPUtil, Multiverse, TimeMachine, coat, dock
from scramjet.compat.nebulae.kit import summarize_samples
from scramjet.runtime.devices import GpuInfo, NoGpuAvailableError

HERE = Path(__file__).parent


def _has_gpu() -> bool:
    return torch.cuda.is_available()


class Net(dock.Craft):
    def __init__(self, scope: str = "NET") -> None:
        super().__init__(scope)
        self.encoder = torch.nn.Linear(4, 3)
        self.head = torch.nn.Linear(3, 2)

    def run(self, x):  # type: ignore[no-untyped-def]
        return self.head(self.encoder(x))


def _net(value: float, scope: str = "NET") -> Net:
    net = Net(scope)
    with torch.no_grad():
        for p in net.parameters():
            p.fill_(value)
    return net


# ---------------------------------------------------------------- Engine / GPUtil


def test_engine_cpu() -> None:
    engine = Engine(device="CPU")
    assert engine.device == torch.device("cpu") and engine.gpus == []
    assert coat([1.0]).device.type == "cpu"
    with pytest.raises(ValueError, match="'CPU' or 'GPU'"):
        Engine(device="TPU")


@pytest.mark.skipif(_has_gpu(), reason="checks the message on a machine without GPUs")
def test_engine_gpu_without_gpus_says_so() -> None:
    before = os.environ.get("CUDA_VISIBLE_DEVICES")
    with pytest.raises(NoGpuAvailableError, match=r"Engine\(device='CPU'\)"):
        Engine(device="GPU", ngpus=1, least_mem=0)
    assert os.environ.get("CUDA_VISIBLE_DEVICES") == before


@pytest.mark.skipif(_has_gpu(), reason="checks the message on a machine without GPUs")
def test_engine_error_says_what_was_asked_what_exists_and_how_to_fix() -> None:
    with pytest.raises(NoGpuAvailableError) as info:
        Engine(device="GPU", ngpus=2, least_mem=1024)
    message = str(info.value)
    assert "Engine(device='GPU', ngpus=2, least_mem=1024)" in message  # what was asked
    assert "no usable NVIDIA GPU" in message  # what is available
    assert "Engine(device='CPU')" in message  # how to fix it
    for internal in ("select_gpus", "default_device", "query_gpus"):
        assert internal not in message


def test_engine_error_lists_the_gpus_that_do_not_qualify(monkeypatch) -> None:
    from scramjet.compat.nebulae import cockpit

    gpus = [GpuInfo(0, 900, 16000, "big"), GpuInfo(1, 5000, 8000, "small")]
    monkeypatch.setattr(cockpit, "query_gpus", lambda: gpus)
    with pytest.raises(NoGpuAvailableError) as info:
        Engine(device="GPU", ngpus=2, least_mem=2048)
    message = str(info.value)
    assert "asked for 2 GPU(s) with at least 2048 MiB free, but 1 qualify" in message
    assert "GPU 0 big: 900/16000 MiB free; GPU 1 small: 5000/8000 MiB free" in message
    assert "Lower ngpus or least_mem" in message
    with pytest.raises(ValueError, match="ngpus"):
        Engine(device="GPU", ngpus=0)


@pytest.mark.skipif(_has_gpu(), reason="checks the message on a machine without GPUs")
def test_gputil_without_gpus_says_so() -> None:
    util = GPUtil()
    for call in (lambda: util.available(1, 0), util.monitor, util.status):
        with pytest.raises(NoGpuAvailableError, match="CPU"):
            call()


def test_gputil_available_picks_freest_and_offers_what_exists() -> None:
    readings = [
        GpuInfo(0, 1000, 8000, "a"),
        GpuInfo(1, 6000, 8000, "b"),
        GpuInfo(2, 3000, 8000, "c"),
    ]
    util = GPUtil(reader=lambda: readings)
    assert [g["index"] for g in util.available(2, 2048)] == [1, 2]
    assert [g["index"] for g in util.available(5, 2048)] == [1, 2]  # fewer than asked
    assert util.available(1, 0)[0]["used_mib"] == 2000


def test_gputil_summary() -> None:
    samples = [
        [GpuInfo(0, 900, 1000, "g"), GpuInfo(1, 100, 1000, "g")],
        [GpuInfo(0, 500, 1000, "g"), GpuInfo(1, 100, 1000, "g")],
    ]
    s0, s1 = summarize_samples(samples)
    assert (s0["min_used_mib"], s0["mean_used_mib"], s0["max_used_mib"]) == (100, 300.0, 500)
    assert s1["samples"] == 2 and s1["max_used_mib"] == 900


def test_nothing_runs_nvidia_smi_or_kills() -> None:
    root = HERE.parents[1] / "src" / "scramjet" / "compat" / "nebulae"
    for name in ("cockpit.py", "kit.py"):
        text = (root / name).read_text()
        for word in ("nvidia-smi", "subprocess", "pkill", "os.kill", "killpg"):
            assert word not in text, f"{name} mentions {word}"


@pytest.mark.gpu
def test_engine_and_gputil_on_a_gpu_machine() -> None:
    util = GPUtil()
    found = util.available(1, 0)
    assert found and found[0]["total_mib"] > 0
    util.monitor(sec=0.1)
    summary = util.status()
    assert summary[0]["samples"] >= 1
    engine = Engine(device="GPU", ngpus=1, least_mem=0)
    assert engine.device.type == "cuda" and len(engine.gpus) == 1


# ---------------------------------------------------------------- TimeMachine


def _files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.suffix == ".pt")


def test_time_machine_keeps_max_anchors_across_a_restart(tmp_path: Path) -> None:
    tm = TimeMachine(ckpt_path=tmp_path, save_path=tmp_path, max_anchors=2)
    for v in (1.0, 2.0, 3.0):
        tm.drop(_net(v))
    folder = tmp_path / "NET"
    first = _files(folder)
    assert len(first) == 2
    restarted = TimeMachine(ckpt_path=tmp_path, save_path=tmp_path, max_anchors=2)
    for v in (4.0, 5.0):
        restarted.drop(_net(v))
    files = _files(folder)
    assert len(files) == 2 and not set(files) & set(first)  # nothing overwritten
    assert [f.split("-")[1] for f in files] == ["000004", "000005"]
    # Make the older file the newest by mtime: the latest is still found by sequence.
    os.utime(folder / files[0], (4_000_000_000, 4_000_000_000))
    net = _net(0.0)
    restarted.to(net)
    assert float(net.head.weight[0, 0].detach()) == 5.0


def test_time_machine_scopes_and_frozen(tmp_path: Path) -> None:
    tm = TimeMachine(ckpt_path=tmp_path, save_path=tmp_path)
    tm.drop(_net(7.0), save_scope="encoder")
    net = _net(0.0)
    with pytest.raises(ValueError, match="missing keys"):
        tm.to(net, frozen=True)  # frozen: the missing head is not allowed
    with pytest.warns(UserWarning, match="skipped keys"):
        tm.to(net)
    assert float(net.encoder.weight[0, 0].detach()) == 7.0
    assert float(net.head.weight[0, 0].detach()) == 0.0
    tm.drop(_net(9.0))
    other = _net(0.0)
    tm.to(other, ckpt_scope="head", frozen=True)
    assert (
        float(other.head.weight[0, 0].detach()) == 9.0
        and float(other.encoder.weight[0, 0].detach()) == 0.0
    )
    with pytest.raises(ValueError, match="matches no parameter"):
        tm.drop(_net(1.0), save_scope="decoder")


def test_time_machine_file_names(tmp_path: Path) -> None:
    tm = TimeMachine(ckpt_path=tmp_path, save_path=tmp_path, max_anchors=3)
    path = tm.drop(_net(2.0), file="best")
    assert path is not None and path.parent.name == "best"
    net = _net(0.0, scope="OTHER")
    tm.to(net, file="best")
    assert float(net.head.bias[0].detach()) == 2.0
    tm.to(net, file=str(path))  # an explicit file
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        tm.to(net, file="missing")
    with pytest.raises(ValueError, match="max_anchors"):
        TimeMachine(tmp_path, tmp_path, max_anchors=0)


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*") if p.name.startswith(".tmp"))


def test_time_machine_file_with_a_suffix_is_one_checkpoint_file(tmp_path: Path) -> None:
    tm = TimeMachine(ckpt_path=tmp_path, save_path=tmp_path)
    path = tm.drop(_net(3.0), file="epoch_0.pth")
    assert path == tmp_path / "epoch_0.pth" and path.is_file()
    # What nebulae wrote: the craft's state dict, read by torch.load (weights only).
    saved = torch.load(path, weights_only=True)
    assert set(saved) == set(_net(0.0).state_dict()) and float(saved["head.bias"][0]) == 3.0
    plain = _net(0.0)
    plain.load_state_dict(saved)
    assert float(plain.encoder.weight[0, 0].detach()) == 3.0
    # The TimeMachine reads it back with the same file name, also into another scope.
    other = _net(0.0, scope="OTHER")
    tm.to(other, file="epoch_0.pth", frozen=True)
    assert float(other.head.weight[0, 0].detach()) == 3.0
    # Dropping the same name again replaces the file; nothing else is left behind.
    tm.drop(_net(4.0), file="epoch_0.pth")
    tm.to(other, file="epoch_0.pth")
    assert float(other.head.weight[0, 0].detach()) == 4.0
    assert sorted(p.name for p in tmp_path.iterdir()) == [".timemachine.json", "epoch_0.pth"]
    # A nested name and a scoped drop.
    nested = tm.drop(_net(5.0), file="runs/encoder.pt", save_scope="encoder")
    assert nested == tmp_path / "runs" / "encoder.pt"
    assert set(torch.load(nested, weights_only=True)) == {"encoder.weight", "encoder.bias"}


def test_time_machine_max_anchors_counts_files_over_all_names(tmp_path: Path) -> None:
    tm = TimeMachine(ckpt_path=tmp_path, save_path=tmp_path, max_anchors=2)
    for epoch in range(4):
        tm.drop(_net(float(epoch)), file=f"epoch_{epoch}.pth")
    assert sorted(p.name for p in tmp_path.glob("*.pth")) == ["epoch_2.pth", "epoch_3.pth"]
    net = _net(0.0)
    tm.to(net, file="epoch_3.pth")
    assert float(net.head.bias[0].detach()) == 3.0
    # Anchors in a folder count too: the oldest file goes, whatever its name.
    anchor = tm.drop(_net(9.0))
    assert anchor is not None
    assert not (tmp_path / "epoch_2.pth").exists() and (tmp_path / "epoch_3.pth").exists()
    # A restarted run keeps counting the files of the earlier one (oldest removed first).
    restarted = TimeMachine(ckpt_path=tmp_path, save_path=tmp_path, max_anchors=2)
    restarted.drop(_net(4.0), file="epoch_4.pth")
    assert not (tmp_path / "epoch_3.pth").exists()
    assert anchor.exists() and (tmp_path / "epoch_4.pth").exists()
    restarted.drop(_net(4.5), file="epoch_4.pth")  # the same file again: still one
    assert anchor.exists()
    kept = [p for p in tmp_path.rglob("*") if p.suffix in (".pt", ".pth")]
    assert len(kept) == 2 and not _leftovers(tmp_path)
    # Files no drop wrote are never removed.
    torch.save(_net(1.0).state_dict(), tmp_path / "mine.pth")
    restarted.drop(_net(6.0), file="epoch_6.pth")
    assert (tmp_path / "mine.pth").exists() and not anchor.exists()


def test_time_machine_file_is_written_atomically(tmp_path: Path, monkeypatch) -> None:
    tm = TimeMachine(ckpt_path=tmp_path, save_path=tmp_path)
    tm.drop(_net(1.0), file="last.pth")

    def crash(obj, f):  # type: ignore[no-untyped-def]
        f.write(b"PK\x03\x04 half a checkpoint")
        raise OSError("disk gone")

    monkeypatch.setattr(torch, "save", crash)
    with pytest.raises(CheckpointWriteError, match="disk gone"):
        tm.drop(_net(2.0), file="last.pth")
    monkeypatch.undo()
    net = _net(0.0)
    tm.to(net, file="last.pth", frozen=True)  # the previous file, whole
    assert float(net.head.weight[0, 0].detach()) == 1.0 and not _leftovers(tmp_path)


def test_time_machine_reads_plain_state_dicts_and_checks_files(tmp_path: Path) -> None:
    tm = TimeMachine(ckpt_path=tmp_path, save_path=tmp_path)
    # A file nebulae itself wrote: torch.save(state_dict) without a checksum trailer.
    torch.save(_net(6.0).state_dict(), tmp_path / "nebulae.pth")
    net = _net(0.0)
    tm.to(net, file="nebulae.pth", frozen=True)
    assert float(net.encoder.bias[0].detach()) == 6.0
    partial = {k: v for k, v in _net(7.0).state_dict().items() if k.startswith("head.")}
    torch.save(partial, tmp_path / "head.pth")
    with pytest.raises(ValueError, match="missing keys"):
        tm.to(net, file="head.pth", frozen=True)
    with pytest.warns(UserWarning, match="skipped keys"):
        tm.to(net, file="head.pth")
    assert float(net.head.bias[0].detach()) == 7.0
    assert float(net.encoder.bias[0].detach()) == 6.0
    with pytest.raises(ValueError, match="no keys under scope"):
        tm.to(net, file="head.pth", ckpt_scope="encoder")
    # A damaged file is reported, not loaded.
    path = tm.drop(_net(8.0), file="damaged.pth")
    assert path is not None
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptCheckpointError, match="checksum"):
        tm.to(net, file="damaged.pth")
    # A folder in the way of a file name says what to do.
    (tmp_path / "old.pth").mkdir()
    with pytest.raises(IsADirectoryError, match="Remove or rename"):
        tm.drop(net, file="old.pth")


# ---------------------------------------------------------------- Multiverse


def test_multiverse_in_one_process() -> None:
    mv = Multiverse(lambda m: None, 1).init()
    net = _net(1.0)
    assert mv.sync(net) is net
    value = torch.tensor([2.0, 4.0])
    torch.testing.assert_close(mv.reduce(value), value)
    torch.testing.assert_close(mv.reduce(value, aggregate=True), value)
    with mv.scope():
        pass

    @Multiverse.Executor
    def main() -> int:
        return 3

    assert main() == 3
    with pytest.raises(ValueError, match="nworld"):
        Multiverse(main, 0)


@pytest.mark.slow  # multiverse reduction across processes: the backward test below
@pytest.mark.distributed
def test_multiverse_reduce_sums_with_aggregate() -> None:
    sys.path.insert(0, str(HERE))
    from nebulae_mv_worker import reduce_universe

    seen = Multiverse(reduce_universe, 2)()
    assert seen["ranks"] == [0, 1]
    # rank r contributes [r + 1, 10 (r + 1)]: sums [3, 30], means [1.5, 15].
    assert seen["sum"] == [[3.0, 30.0], [3.0, 30.0]]
    assert seen["mean"] == [[1.5, 15.0], [1.5, 15.0]]


def test_multiverse_reduce_keeps_the_graph_in_one_process() -> None:
    mv = Multiverse(lambda m: None, 1).init()
    w = torch.ones(3, requires_grad=True)
    loss = (w * 2).sum()
    reduced = mv.reduce(loss)
    assert reduced.requires_grad and reduced.item() == 6.0
    reduced.backward()  # nebulae's `loss = mv.reduce(loss)` then the backward pass
    assert w.grad.tolist() == [2.0, 2.0, 2.0]


@pytest.mark.distributed
def test_multiverse_reduce_backward_across_two_processes() -> None:
    sys.path.insert(0, str(HERE))
    from nebulae_mv_worker import backward_universe

    seen = Multiverse(backward_universe, 2)()
    # losses 2 and 4: mean 3, sum 6 on both ranks
    assert [seen[r]["mean"]["value"] for r in (0, 1)] == [3.0, 3.0]
    assert [seen[r]["sum"]["value"] for r in (0, 1)] == [6.0, 6.0]
    # mean: each rank gets the gradient of its own loss, as loss.backward() gives it
    assert [seen[r]["mean"]["grad"] for r in (0, 1)] == [[1.0, 1.0], [2.0, 2.0]]
    # sum: nworld times that
    assert [seen[r]["sum"]["grad"] for r in (0, 1)] == [[2.0, 2.0], [4.0, 4.0]]


@pytest.mark.slow  # the default run covers Multiverse: test_multiverse_reduce_backward_...
@pytest.mark.distributed
def test_brochure_multiverse_example_runs_on_cpu(tmp_path: Path) -> None:
    script = HERE / "scripts" / "multiverse_example.py"
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=150
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["world"] == 2
    assert result["same_weights"]  # DDP kept both worlds' models identical
    assert result["orders_differ_between_epochs"]
    assert result["sum_is_twice_mean"]
    assert len(list((tmp_path / "ckpt" / "cnn").glob("ckpt-*.pt"))) == 1


def test_time_machine_names_a_wrapped_craft_after_its_scope(tmp_path: Path) -> None:
    # After mv.sync(net) the craft is wrapped (DistributedDataParallel, DataParallel):
    # drop() and to() still use the craft's scope, so a single-process run finds it.
    tm = TimeMachine(ckpt_path=tmp_path, save_path=tmp_path)
    path = tm.drop(torch.nn.DataParallel(_net(3.0, scope="cnn")))
    assert path is not None and path.parent.name == "cnn"
    restored = _net(0.0, scope="cnn")
    tm.to(restored, frozen=True)
    assert float(restored.head.weight[0, 0].detach()) == 3.0
    wrapped = torch.nn.DataParallel(_net(0.0, scope="cnn"))
    tm.to(wrapped, frozen=True)
    assert float(wrapped.module.head.weight[0, 0].detach()) == 3.0


def test_time_machine_folder_without_anchors_is_explained(tmp_path: Path) -> None:
    tm = TimeMachine(ckpt_path=tmp_path, save_path=tmp_path, max_anchors=1)
    tm.drop(_net(1.0))  # NET/ckpt-1
    tm.drop(_net(2.0), file="last.pth")  # removes NET/ckpt-1: max_anchors counts all files
    with pytest.raises(FileNotFoundError) as info:
        tm.to(_net(0.0))
    message = str(info.value)
    assert "NET" in message and "max_anchors" in message and "manager" not in message
    tm.wait()  # drops are durable when they return; wait() and close() are accepted
    tm.close()
