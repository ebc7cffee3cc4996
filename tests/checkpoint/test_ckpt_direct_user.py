"""The checkpoint API used directly, as a practitioner would: what is saved comes back
exactly, what cannot be saved is refused at save() with a clear error, and what cannot be
loaded says why."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from tests.tracking.s3_helpers import S3Server, s3, s3_server  # noqa: F401  (fixtures)
from torch import nn

from scramjet.checkpoint import (
    CheckpointError,
    CheckpointManager,
    CheckpointMismatchError,
    CorruptCheckpointError,
    read_checkpoint,
    write_checkpoint,
)
from scramjet.checkpoint.payload import MARKER
from scramjet.checkpoint.remote import RemoteCheckpointManager, load_remote

# ----------------------------------------------------------------- step and epoch


@pytest.mark.parametrize("epoch", [1.0, "1", True, 2.5])
def test_an_epoch_that_is_not_an_int_is_refused_at_save(tmp_path: Path, epoch: object) -> None:
    manager = CheckpointManager(tmp_path)
    with pytest.raises(ValueError, match=r"epoch must be an int or None, got") as refused:
        manager.save({"w": torch.zeros(2)}, step=1, epoch=epoch)  # type: ignore[arg-type]
    assert repr(epoch) in str(refused.value)
    manager.close()
    assert list(tmp_path.glob("ckpt-*")) == []  # nothing written that would not load


@pytest.mark.parametrize("async_write", [True, False])
def test_numpy_and_tensor_integers_are_accepted_as_step_and_epoch(
    tmp_path: Path, async_write: bool
) -> None:
    manager = CheckpointManager(tmp_path, async_write=async_write)
    for i, epoch in enumerate([np.int64(1), torch.tensor(2), np.int32(3)]):
        manager.save({"w": torch.zeros(2)}, step=np.int64(10 + i), epoch=epoch)  # type: ignore[arg-type]
    result = manager.load()
    assert (result.step, result.epoch) == (12, 3)
    assert type(result.step) is int and type(result.epoch) is int
    assert [(c.step, c.epoch) for c in manager.checkpoints()] == [(10, 1), (11, 2), (12, 3)]
    manager.close()


def test_write_checkpoint_refuses_an_epoch_it_could_not_read_back(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="epoch must be an int"):
        write_checkpoint(tmp_path / "one.pt", {"w": torch.zeros(2)}, epoch=1.5)  # type: ignore[arg-type]
    path = write_checkpoint(tmp_path / "two.pt", {"w": torch.zeros(2)}, step=np.int64(4))  # type: ignore[arg-type]
    assert read_checkpoint(path)["step"] == 4


@pytest.mark.parametrize("value", ["0.5", b"1", 10**400])
def test_a_metric_that_is_not_a_number_is_refused(tmp_path: Path, value: object) -> None:
    manager = CheckpointManager(tmp_path, keep_best=1, monitor="loss")
    with pytest.raises(TypeError, match=r"metric 'loss' must be a number"):
        manager.save({"w": torch.zeros(2)}, step=1, metrics={"loss": value})
    manager.close()


# ----------------------------------------------------------------- numpy values


@pytest.mark.parametrize("async_write", [True, False])
def test_numpy_arrays_come_back_with_their_shape_dtype_and_values(
    tmp_path: Path, async_write: bool
) -> None:
    arrays = {
        "scalar": np.array(3.5),  # 0-d: came back as shape (1,)
        "big_endian": np.arange(4, dtype=">f4"),
        "fortran": np.asfortranarray(np.arange(6).reshape(2, 3)),
        "strided": np.arange(10)[::3],
        "read_only": np.frombuffer(b"\0" * 16, dtype=np.float32),
    }
    manager = CheckpointManager(tmp_path, async_write=async_write)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch's "not writable" warning must not leak
        manager.save({"arrays": arrays}, step=1)
    values = manager.load().values["arrays"]
    for name, array in arrays.items():
        got = values[name]
        assert isinstance(got, np.ndarray), name
        assert got.shape == array.shape, name
        assert got.dtype == array.dtype.newbyteorder("="), name
        assert np.array_equal(got, array), name
    manager.close()


@pytest.mark.parametrize(
    "array",
    [
        np.array(["a", "bc"]),
        np.array(["2020-01-01"], dtype="datetime64[D]"),
        np.zeros(2, dtype=[("a", "i4"), ("b", "f4")]),
    ],
)
def test_a_numpy_array_of_an_unsupported_dtype_is_refused_naming_its_key(
    tmp_path: Path, array: np.ndarray
) -> None:
    manager = CheckpointManager(tmp_path)
    with pytest.raises(TypeError) as refused:
        manager.save({"data": {"labels": array}}, step=1)
    message = str(refused.value)
    assert "state['data']['labels']" in message
    assert str(array.dtype) in message and "tolist()" in message
    manager.close()


# ----------------------------------------------------------------- background snapshot


def test_a_background_save_writes_conjugate_and_negative_views_as_they_read(
    tmp_path: Path,
) -> None:
    base = torch.tensor([1 + 2j, 3 - 4j], dtype=torch.complex64)
    values = {
        "conj": base.conj(),  # a view with the conjugate bit: its storage holds `base`
        "neg": torch._neg_view(torch.tensor([1.0, -2.0])),
        "grad": torch.ones(3, requires_grad=True),
    }
    saved = {}
    for async_write in (False, True):
        manager = CheckpointManager(tmp_path / str(async_write), async_write=async_write)
        path = manager.save(values, step=1)
        manager.close()
        saved[async_write] = read_checkpoint(path)["state"]
    for name, tensor in values.items():
        for async_write, state in saved.items():
            got = state[name]
            assert torch.equal(got.resolve_conj().resolve_neg(), tensor.detach()), (
                name,
                async_write,
            )
            assert got.requires_grad == tensor.requires_grad, (name, async_write)


# ----------------------------------------------------------------- reading errors


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_loading_onto_a_device_this_machine_lacks_is_not_called_corruption(
    tmp_path: Path,
) -> None:
    manager = CheckpointManager(tmp_path)
    for step in (1, 2):
        manager.save({"model": nn.Linear(2, 2)}, step=step)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "trying the previous checkpoint" warnings
        with pytest.raises(ValueError, match=r"map_location='cuda'.*map_location='cpu'") as e:
            manager.load({"model": nn.Linear(2, 2)}, map_location="cuda")
    assert not isinstance(e.value, CorruptCheckpointError)
    with pytest.raises(ValueError, match="map_location"):
        read_checkpoint(manager.latest_path, map_location=torch.device("cuda", 0))  # type: ignore[arg-type]
    manager.close()


class _Settings:
    lr = 0.1


def test_a_file_holding_a_custom_object_names_its_class(tmp_path: Path) -> None:
    path = tmp_path / "ckpt-000001-step1.pt"
    torch.save({MARKER: 1, "step": 1, "state": {"settings": _Settings()}}, path)
    with pytest.raises(CorruptCheckpointError) as refused:
        read_checkpoint(path)
    message = str(refused.value)
    assert f"{__name__}._Settings" in message  # which object torch refused
    assert "weights_only" in message and "\x1b[" not in message  # no terminal escapes


def test_a_truncated_checkpoint_is_called_truncated(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path)
    path = manager.save({"w": torch.arange(3000.0)}, step=1)
    manager.close()
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CorruptCheckpointError, match=r"cannot be read: .*truncated") as failed:
        read_checkpoint(path)
    assert "not a torch.save archive" not in str(failed.value)


# ----------------------------------------------------------------- remote checkpoints


def test_a_remote_manager_on_a_fresh_machine_resumes_from_the_store(
    s3: S3Server,  # noqa: F811
    tmp_path: Path,
) -> None:
    bucket = s3.new_bucket()
    url = f"s3://{bucket}/run/checkpoints"
    trained = nn.Linear(3, 2)
    with RemoteCheckpointManager(url, tmp_path / "first", keep_last=2) as manager:
        for step in (1, 2, 3):
            with torch.no_grad():
                trained.weight.add_(1.0)
            manager.save({"model": trained}, step=step)
    # Another machine: an empty local folder, the quickstart's resume pattern.
    manager = RemoteCheckpointManager(url, tmp_path / "fresh", keep_last=2)
    assert manager.latest_path is not None
    model = nn.Linear(3, 2)
    result = manager.load({"model": model})
    assert result.step == 3 and torch.equal(model.weight, trained.weight)
    # Saving goes on after step 3, and rotation keeps the store's newest files.
    assert manager.save({"model": model}, step=4).name == "ckpt-000004-step4.pt"
    manager.close()
    assert sorted(s3.list_keys(bucket)) == [
        "run/checkpoints/ckpt-000003-step3.pt",
        "run/checkpoints/ckpt-000004-step4.pt",
        "run/checkpoints/index.json",  # which="best" on another machine ranks by it
    ]


# ----------------------------------------------------------------- wrapped models


@pytest.mark.parametrize("prefix", ["module.", "_orig_mod.", "module._orig_mod."])
def test_a_state_dict_taken_from_a_wrapped_model_loads_into_the_plain_model(
    tmp_path: Path, prefix: str
) -> None:
    trained = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    # What model.state_dict() of a DDP / torch.compile wrapper holds: prefixed keys.
    taken = {prefix + key: value for key, value in trained.state_dict().items()}
    manager = CheckpointManager(tmp_path)
    manager.save({"model": taken}, step=1)
    model = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    result = manager.load({"model": model})
    assert result.clean
    for key, value in trained.state_dict().items():
        assert torch.equal(model.state_dict()[key], value), key
    manager.close()


def test_a_state_dict_of_another_model_is_still_refused(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path)
    manager.save({"model": {"module.head.weight": torch.zeros(2, 3)}}, step=1)
    with pytest.raises(CheckpointMismatchError, match=r"missing keys.*\n.*unexpected keys"):
        manager.load({"model": nn.Linear(3, 2)})
    manager.close()


# ----------------------------------------------------------------- training objects


def test_a_grad_scaler_saved_disabled_does_not_load_into_an_enabled_one(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path)
    manager.save({"scaler": torch.amp.GradScaler("cpu", enabled=False)}, step=1)
    scaler = torch.amp.GradScaler("cpu", init_scale=256.0)
    with pytest.raises(CheckpointMismatchError, match=r"'scaler'.*disabled.*strict=False"):
        manager.load({"scaler": scaler})
    with pytest.warns(UserWarning, match="scaler missing"):
        result = manager.load({"scaler": scaler}, strict=False)
    assert result.missing_keys == {
        "scaler": ["scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker"]
    }
    assert scaler.get_scale() == 256.0  # left as it was
    manager.close()


# No retries inside botocore or s3fs: a request to a stopped server fails at once.
FAST = {"config_kwargs": {"retries": {"max_attempts": 1}}}


def test_reading_a_store_that_is_down_says_so_and_names_the_local_copies(
    s3: S3Server,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import s3fs

    monkeypatch.setattr(s3fs.S3FileSystem, "retries", 1)
    bucket = s3.new_bucket()
    url = f"s3://{bucket}/run/checkpoints"
    with RemoteCheckpointManager(url, tmp_path, storage_options=FAST) as manager:
        manager.save({"w": torch.ones(2)}, step=1)
    s3.stop()
    try:
        with pytest.raises(CheckpointError) as failed:
            load_remote(url, {}, local_dir=tmp_path, storage_options=FAST)
        message = str(failed.value)
        assert url in message and "EndpointConnectionError" in message
        assert str(tmp_path) in message and "ckpt-000001-step1.pt" in message
        # A manager made while the store is down cannot tell what was uploaded: it keeps
        # the local files without claiming that an earlier process failed to upload them.
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            RemoteCheckpointManager(url, tmp_path, storage_options=FAST)
        said = " ".join(str(w.message) for w in caught)
        assert "could not list" in said and "were not uploaded" not in said
    finally:
        s3.start()


# ----------------------------------------------------------------- rotation settings


@pytest.mark.parametrize("option", ["keep_last", "keep_best"])
def test_a_bool_is_not_taken_as_a_count_of_checkpoints(tmp_path: Path, option: str) -> None:
    with pytest.raises(ValueError, match=rf"{option} must be .* got True"):
        CheckpointManager(tmp_path, monitor="loss", **{option: True})  # type: ignore[arg-type]


def test_best_with_only_nan_values_says_the_values_are_nan(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path, keep_best=1, monitor="loss")
    manager.save({"w": torch.zeros(1)}, step=1, metrics={"loss": float("nan")})
    manager.save({"w": torch.zeros(1)}, step=2, metrics={"acc": 1.0})
    with pytest.raises(FileNotFoundError, match=r"'loss'.*1 checkpoint.* NaN.*acc"):
        manager.load(which="best")
    manager.close()


def test_a_damaged_local_copy_is_downloaded_again_not_skipped(
    s3: S3Server,  # noqa: F811
    tmp_path: Path,
) -> None:
    bucket = s3.new_bucket()
    url = f"s3://{bucket}/run/checkpoints"
    with RemoteCheckpointManager(url, tmp_path, keep_last=None) as manager:
        for step in (1, 2):
            newest = manager.save({"w": torch.full((1000,), float(step))}, step=step)
    data = bytearray(newest.read_bytes())
    data[len(data) // 2] ^= 0xFF  # the local copy rots; the store's object is fine
    newest.write_bytes(bytes(data))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the store's newest is good: nothing is skipped
        result = load_remote(url, {}, local_dir=tmp_path)
    assert result.step == 2 and torch.equal(result.values["w"], torch.full((1000,), 2.0))


def _other_optimizer(model: nn.Module) -> dict[str, object]:
    return {"model": model, "opt": torch.optim.AdamW(model.parameters())}


def _missing_entry(model: nn.Module) -> dict[str, object]:
    sgd = torch.optim.SGD(model.parameters(), lr=1.0)
    return {"model": model, "sched": torch.optim.lr_scheduler.StepLR(sgd, 2)}


def _other_model_after(model: nn.Module) -> dict[str, object]:
    opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    return {"opt": opt, "model": model, "head": nn.Linear(5, 5)}


@pytest.mark.parametrize("build", [_other_optimizer, _missing_entry, _other_model_after])
def test_a_strict_load_that_fails_changes_nothing(tmp_path: Path, build: object) -> None:
    trained = nn.Linear(2, 2)
    optimizer = torch.optim.SGD(trained.parameters(), lr=0.1, momentum=0.9)
    trained(torch.ones(1, 2)).sum().backward()
    optimizer.step()
    manager = CheckpointManager(tmp_path)
    manager.save({"model": trained, "opt": optimizer, "head": nn.Linear(4, 4)}, step=1)
    model = nn.Linear(2, 2)
    state = build(model)  # type: ignore[operator]
    before = {k: v.state_dict() for k, v in state.items()}
    before = {
        k: {n: (t.clone() if torch.is_tensor(t) else t) for n, t in v.items()}
        for k, v in before.items()
    }
    with pytest.raises(CheckpointMismatchError):
        manager.load(state)
    for name, obj in state.items():
        now = obj.state_dict()
        assert now.keys() == before[name].keys(), name
        for key, value in now.items():
            if torch.is_tensor(value):
                assert torch.equal(value, before[name][key]), (name, key)
            else:
                assert value == before[name][key], (name, key)
    manager.close()


def test_a_folder_or_a_bare_file_name_as_which_gets_a_pointed_error(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path / "ckpts")
    path = manager.save({"w": torch.zeros(1)}, step=1)
    manager.close()
    with pytest.raises(FileNotFoundError, match=r"is a folder.*which='latest'"):
        manager.load(which=tmp_path / "ckpts")
    with pytest.raises(
        FileNotFoundError, match=r"does not exist.*did you mean .*ckpts/" + path.name
    ):
        manager.load(which=path.name)
    with pytest.raises(IsADirectoryError, match=r"reads one checkpoint file.*CheckpointManager"):
        read_checkpoint(tmp_path / "ckpts")
