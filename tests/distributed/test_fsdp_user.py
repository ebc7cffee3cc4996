"""A user moving models that need sharding to the Trainer: ``shard_model`` (FSDP2) under
torchrun with 2 gloo processes on CPU, compared with the same model trained in one
process with the same seed and the same global batch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import fsdp_user_job as job
import pytest
import torch
from tests.common.torchrun import run_torchrun
from torch import nn

from scramjet.runtime import shard_model
from scramjet.runtime.fsdp import _default_units, _units_without_shared_parameters

JOB = str(Path(__file__).with_name("fsdp_user_job.py"))
# SGD, 2 ranks x 6 samples vs 1 process x 12: the same maths summed in another order
# (observed differences ~6e-8).
TOL = 1e-5
# AdamW divides each update by sqrt(v): a rounding difference in a small gradient moves
# its coordinate by up to lr x (relative difference); observed 2e-6 after 4 updates.
ADAM_TOL = 5e-5


def torchrun(out: Path, *args: str) -> list[dict[str, Any]]:
    done = run_torchrun(JOB, str(out), *args, nproc=2, timeout=150)
    assert done.returncode == 0, done.stderr[-4000:]
    return [torch.load(out / f"rank{r}.pt", weights_only=False) for r in (0, 1)]


def max_difference(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    assert set(a) == set(b)
    return max(float((a[k].float() - b[k].float()).abs().max()) for k in a)


@pytest.fixture(scope="module")
def sharded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    out = tmp_path_factory.mktemp("fsdp_user")
    return out, torchrun(out)


@pytest.fixture(scope="module")
def single(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """The same scenarios in this one process (shard_model leaves the model as it is)."""
    out = tmp_path_factory.mktemp("single_user")
    return out, job.main(str(out), "tied_lm", "gpt2")


# --------------------------------------------------------------------- one process, fast
def test_mixed_precision_in_one_process_warns_that_it_is_not_applied(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from torch.distributed.fsdp import MixedPrecisionPolicy

    monkeypatch.delenv("WORLD_SIZE", raising=False)
    model = nn.Linear(4, 2)
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16)
    with pytest.warns(UserWarning, match="single process.*not applied.*precision='bf16'"):
        assert shard_model(model, mixed_precision=policy) is model
    assert model.weight.dtype == torch.float32


def test_default_units_leave_children_sharing_a_parameter_to_the_root() -> None:
    model = job.tied_lm()  # Sequential(embedding, linear, tanh, linear, head = embedding)
    units = _units_without_shared_parameters(model, _default_units(model))
    assert units == [model[1], model[3]]  # the embedding and the head go with the root
    # A module used twice (ALBERT-style shared layers) is one unit, shared with nobody.
    shared = nn.Linear(4, 4)
    repeated = nn.Sequential(shared, nn.Tanh(), shared)
    assert _units_without_shared_parameters(repeated, _default_units(repeated)) == [shared]


# ------------------------------------------------------------------ two processes, slow
@pytest.mark.slow
def test_sequential_lm_with_head_tied_to_embedding_trains_sharded_like_one_process(
    sharded: tuple[Path, list[dict[str, Any]]], single: tuple[Path, dict[str, Any]]
) -> None:
    # Both tied modules are children of the Sequential: sharded as separate units, the
    # shared weight would belong to two groups, which fully_shard refuses.
    want = single[1]["tied_lm"]
    for report in sharded[1]:
        got = report["tied_lm"]
        assert "error" not in got, got
        assert got["still_tied"]
        assert max_difference(got["weights"], want["weights"]) < TOL
        losses = got["history"]["metrics"]["train_loss_epoch"]
        assert losses == pytest.approx(want["history"]["metrics"]["train_loss_epoch"], abs=TOL)


@pytest.mark.slow
def test_explicit_units_sharing_a_parameter_are_refused_with_their_names(
    sharded: tuple[Path, list[dict[str, Any]]],
) -> None:
    message = sharded[1][0]["refusals"]["shared_units"]
    assert message.startswith("ValueError: shard_model(modules=...)"), message
    assert "'0.weight' (in '0') and '4.weight' (in '4')" in message
    assert "leave the units that hold them out of modules=" in message


@pytest.mark.slow
def test_a_model_sharded_twice_is_refused_clearly(
    sharded: tuple[Path, list[dict[str, Any]]],
) -> None:
    message = sharded[1][0]["refusals"]["twice"]
    assert message.startswith("ValueError: shard_model received a model that is already sharded")
    assert "FSDPSequential" in message


@pytest.mark.slow
def test_best_weights_reload_after_an_evaluation_with_reshard_after_forward_false(
    sharded: tuple[Path, list[dict[str, Any]]],
) -> None:
    # The evaluation (a forward without backward) leaves the gathered parameters in place;
    # SaveBestModelCallback then loads the best epoch's weights at the end of the run.
    for report in sharded[1]:
        got = report["keep_best"]
        assert "error" not in got, got
        eval_losses = got["history"]["metrics"]["eval_loss_epoch"]
        assert eval_losses[-1] > min(eval_losses)  # the best is not the last epoch
        assert max_difference(got["weights"], got["best"]) == 0.0


@pytest.mark.slow
def test_gpt2_with_tied_embeddings_schedule_and_clipping_matches_one_process(
    sharded: tuple[Path, list[dict[str, Any]]], single: tuple[Path, dict[str, Any]]
) -> None:
    want = single[1]["gpt2"]
    for report in sharded[1]:
        got = report["gpt2"]
        assert "error" not in got, got
        assert max_difference(got["weights"], want["weights"]) < ADAM_TOL
        for name in ("train_loss_epoch", "eval_loss_epoch"):
            values = got["history"]["metrics"][name]
            assert values == pytest.approx(want["history"]["metrics"][name], abs=TOL), name
        torch.testing.assert_close(got["predictions"], want["predictions"], atol=1e-4, rtol=0)
    # The checkpoint holds both tied names, each the full [vocab, hidden] tensor.
    weights = sharded[1][0]["gpt2"]["weights"]
    assert torch.equal(weights["lm_head.weight"], weights["transformer.wte.weight"])
    assert weights["lm_head.weight"].shape == (50, 16)


@pytest.mark.slow
def test_experiment_saves_the_full_weights_of_a_sharded_model(
    sharded: tuple[Path, list[dict[str, Any]]],
) -> None:
    out, reports = sharded
    for report in reports:
        assert "error" not in report["experiment"], report["experiment"]
    (run_dir,) = (out / "runs" / "fsdp").iterdir()
    saved = torch.load(run_dir / "model" / "model.pt", weights_only=True)
    assert max_difference(saved, reports[0]["gpt2"]["weights"]) == 0.0


@pytest.mark.slow
def test_gpt2_resumed_mid_epoch_under_fsdp_is_bitwise_the_uninterrupted_run(
    sharded: tuple[Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    out, reports = sharded
    ckpt = out / "gpt2_ckpt" / "ckpt-000003-step3.pt"  # one update into epoch 2
    resumed = torchrun(tmp_path, f"resume={ckpt}")
    for rank in (0, 1):
        got, want = resumed[rank]["resume"], reports[rank]["gpt2"]
        assert "error" not in got, got
        assert max_difference(got["weights"], want["weights"]) == 0.0
        assert got["history"] == want["history"]


@pytest.mark.slow
def test_epoch_loss_resumed_in_one_process_from_two_counts_every_sample(
    sharded: tuple[Path, list[dict[str, Any]]], single: tuple[Path, dict[str, Any]]
) -> None:
    out, _ = sharded
    trainer = job.gpt2_trainer([])
    with pytest.warns(UserWarning, match="saved by 2 process"):
        job.train_gpt2(trainer, resume_from=out / "gpt2_ckpt" / "ckpt-000003-step3.pt")
    want = single[1]["gpt2"]
    weights = {k: v.detach() for k, v in trainer.unwrapped_model.state_dict().items()}
    assert max_difference(weights, want["weights"]) < ADAM_TOL  # the weights agree
    losses = trainer.run_history.get_metric_values("train_loss_epoch")
    assert losses == pytest.approx(want["history"]["metrics"]["train_loss_epoch"], abs=TOL)
