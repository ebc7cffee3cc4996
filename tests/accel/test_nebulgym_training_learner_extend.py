"""nebulgym's ``TrainingLearner(model, backends, extend=...)``."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from scramjet.compat.nebulgym import TrainingLearner


def test_extend_true_is_nebulgyms_default_learner_over_the_model():
    torch.manual_seed(0)
    model = nn.Linear(3, 2)
    learner = TrainingLearner(model, ["PYTORCH"], extend=True)
    x = torch.randn(4, 3)
    torch.testing.assert_close(learner(x), model(x), rtol=0, atol=0)
    assert learner.weight is model.weight  # attributes of the model reach through
    assert [p for p in learner.parameters()] == [model.weight, model.bias]
    by_position = TrainingLearner(nn.Linear(3, 2), ["PYTORCH"], True)
    assert by_position(x).shape == (4, 2)


def test_extend_false_names_the_class_decorator():
    with pytest.raises(ValueError, match=r"extend=False.*@accelerate_model\(\)"):
        TrainingLearner(nn.Linear(3, 2), ["PYTORCH"], extend=False)


def test_extend_of_another_type_says_what_it_takes():
    with pytest.raises(TypeError, match=r"extend must be True or False.*'yes'"):
        TrainingLearner(nn.Linear(3, 2), ["PYTORCH"], extend="yes")  # type: ignore[arg-type]
