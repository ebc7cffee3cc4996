"""Distributed helpers in one process (no-ops), environment parsing, unpadding, CLI options."""

from __future__ import annotations

import argparse
from datetime import timedelta

import pytest
import torch
from torch.utils.data import DistributedSampler

from scramjet.runtime import (
    DistEnv,
    barrier,
    broadcast_object,
    eval_sampler,
    gather,
    gather_for_metrics,
    gather_object,
    get_rank,
    get_world_size,
    init_distributed,
    is_distributed,
    is_main_process,
    read_env,
    reduce,
    unpad_gathered,
)
from scramjet.runtime import cli as launch_cli
from scramjet.runtime.distributed import _timeout_seconds


@pytest.fixture
def no_launcher_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "SCRAMJET_DIST_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)


def test_read_env_from_launcher_variables() -> None:
    env = {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}
    assert read_env(env) == DistEnv(3, 4, 1, 2)
    assert read_env({}) == DistEnv(0, 1, 0, 1)
    with pytest.raises(ValueError, match="RANK=4 and WORLD_SIZE=4 are inconsistent"):
        read_env({"RANK": "4", "WORLD_SIZE": "4"})
    with pytest.raises(ValueError, match="WORLD_SIZE='two' is not an integer"):
        read_env({"WORLD_SIZE": "two"})


def test_timeout_from_argument_env_and_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SCRAMJET_DIST_TIMEOUT", raising=False)
    assert _timeout_seconds(None) == 300.0
    assert _timeout_seconds(timedelta(minutes=2)) == 120.0
    monkeypatch.setenv("SCRAMJET_DIST_TIMEOUT", "42")
    assert _timeout_seconds(None) == 42.0
    assert _timeout_seconds(5) == 5.0
    monkeypatch.setenv("SCRAMJET_DIST_TIMEOUT", "soon")
    with pytest.raises(ValueError, match="SCRAMJET_DIST_TIMEOUT='soon' is not a number"):
        _timeout_seconds(None)


def test_helpers_are_no_ops_in_one_process(no_launcher_env: None) -> None:
    assert init_distributed() == DistEnv()
    assert not torch.distributed.is_initialized()
    assert (get_rank(), get_world_size(), is_main_process(), is_distributed()) == (
        0,
        1,
        True,
        False,
    )
    barrier()
    value = torch.tensor([1.0, 2.0])
    reduced = reduce(value, "mean")
    assert torch.equal(reduced, value) and reduced is not value
    assert float(reduce(3.0, "sum")) == 3.0
    assert reduce(torch.tensor([1, 2]), "mean").dtype == torch.float64
    assert torch.equal(gather(torch.tensor(5)), torch.tensor([5]))
    assert gather_object({"a": 1}) == [{"a": 1}]
    assert broadcast_object("x") == "x"
    assert torch.equal(gather_for_metrics(torch.arange(4), 4), torch.arange(4))
    with pytest.raises(ValueError, match="op must be one of"):
        reduce(value, "avg")  # type: ignore[arg-type]


def test_init_without_master_address_names_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    monkeypatch.delenv("MASTER_PORT", raising=False)
    with pytest.raises(RuntimeError, match=r"MASTER_ADDR, MASTER_PORT is not set.*scramjet launch"):
        init_distributed()


def test_nccl_with_more_processes_than_gpus_names_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    # CUDA's own error here was 'invalid device ordinal' from torch.cuda.set_device.
    for name, value in {"WORLD_SIZE": "2", "RANK": "1", "LOCAL_RANK": "1"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "29599")
    count = torch.cuda.device_count()
    if count > 1:
        monkeypatch.setenv("LOCAL_RANK", str(count))
    with pytest.raises(RuntimeError, match=rf"but this machine has {count} CUDA device.*per node"):
        init_distributed(backend="nccl")


@pytest.mark.parametrize(("num_samples", "world"), [(33, 2), (10, 3), (7, 4), (8, 4), (5, 1)])
def test_unpad_restores_dataset_order_of_a_real_sampler(num_samples: int, world: int) -> None:
    dataset = list(range(num_samples))
    # What each rank would see, in rank order, as the real DistributedSampler hands it out.
    per_rank = [
        list(DistributedSampler(dataset, num_replicas=world, rank=r, shuffle=False))
        for r in range(world)
    ]
    flat = [i for part in per_rank for i in part]
    assert unpad_gathered(flat, num_samples, world) == dataset
    restored = unpad_gathered(torch.tensor(flat).unsqueeze(1).repeat(1, 2), num_samples, world)
    assert torch.equal(restored[:, 0], torch.arange(num_samples)) and restored.shape == (
        num_samples,
        2,
    )


def test_unpad_rejects_wrong_lengths() -> None:
    with pytest.raises(ValueError, match="got 33 gathered rows, expected 34"):
        unpad_gathered(list(range(33)), 33, 2)


def test_eval_sampler_does_not_shuffle_or_drop() -> None:
    sampler = eval_sampler(range(5), num_replicas=2, rank=1)
    assert list(sampler) == [1, 3, 0]


def parse_launch(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    launch_cli.configure_parser(parser)
    return parser.parse_args(argv)


def test_launch_options_translate_to_torchrun() -> None:
    single = launch_cli.build_torchrun_argv(
        parse_launch(["--nproc-per-node", "2", "t.py", "--lr", "1"])
    )
    assert single == [
        "--nproc-per-node=2",
        "--max-restarts=0",
        "--standalone",
        "--module",
        "scramjet.runtime._script",
        "t.py",
        "--lr",
        "1",
    ]
    multi = launch_cli.build_torchrun_argv(
        parse_launch(["--nnodes", "2", "--node-rank", "1", "--master-addr", "10.0.0.1", "t.py"])
    )
    assert "--nnodes=2" in multi and "--node-rank=1" in multi
    assert "--master-addr=10.0.0.1" in multi and "--master-port=29500" in multi
    with pytest.raises(ValueError, match="needs --master-addr"):
        launch_cli.build_torchrun_argv(parse_launch(["--nnodes", "2", "t.py"]))
    with pytest.raises(ValueError, match=r"--node-rank must be in 0\.\.1"):
        launch_cli.build_torchrun_argv(
            parse_launch(["--nnodes", "2", "--node-rank", "2", "--master-addr", "a", "t.py"])
        )


def test_launch_missing_script_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert launch_cli.run(parse_launch(["no_such_script.py"])) == 2
    assert "does not exist" in capsys.readouterr().err
