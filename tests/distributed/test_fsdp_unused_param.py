"""FSDP2 resume from a checkpoint in which a parameter has no optimizer state yet (a head
the loss does not use until the second epoch, AdamW): the resumed run ends bitwise equal
to the uninterrupted one, and an optimizer of other parameter groups is still refused
(torchrun, 2 processes, gloo on CPU)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from tests.common.torchrun import run_torchrun

pytestmark = pytest.mark.distributed

JOB = str(Path(__file__).with_name("fsdp_unused_param_job.py"))


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("fsdp_unused_param")
    done = run_torchrun(JOB, str(out), timeout=180)
    assert done.returncode == 0, done.stderr[-4000:]
    loaded: dict[str, Any] = torch.load(out / "result.pt", weights_only=False)
    return loaded


def test_a_parameter_without_optimizer_state_resumes_bitwise(result: dict[str, Any]) -> None:
    full, resumed = result["full"], result["resumed"]
    assert full["step"] == resumed["step"] == 8
    for key, value in full["weights"].items():
        assert torch.equal(resumed["weights"][key], value), key
    # The aux head (positions 4, 5) started its Adam steps in the second epoch in both runs:
    # the resume did not give it a step of its own when loading.
    assert set(resumed["optimizer"]["state"]) == set(full["optimizer"]["state"])
    for i, state in full["optimizer"]["state"].items():
        for name, value in state.items():
            assert torch.equal(resumed["optimizer"]["state"][i][name], value), (i, name)
    assert float(full["optimizer"]["state"][4]["step"]) == 4.0


def test_an_optimizer_of_other_groups_is_still_refused(result: dict[str, Any]) -> None:
    two_groups, fewer_params = result["refusals"]
    assert two_groups.startswith("The checkpoint's optimizer has 1 parameter group(s); this ")
    assert "optimizer has 2. Create the optimizer with the same parameter groups" in two_groups
    assert fewer_params.startswith(
        "The checkpoint's optimizer has parameter groups of sizes [6]; this optimizer's "
        "groups have sizes [4]."
    ), fewer_params
