"""coat() of a list that cannot become one tensor says what it received and how to fix it."""

from __future__ import annotations

import pytest

from scramjet.compat.nebulae import coat


@pytest.mark.parametrize(
    ("datum", "named"),
    [
        ([[1, 2], [3]], "ragged"),
        (["cat", "dog"], "str"),
        ([None, 1], "NoneType"),
        ([1, 2**70], "int64"),
        (2**70, "int64"),
    ],
)
def test_coat_names_what_it_cannot_convert(datum: object, named: str) -> None:
    with pytest.raises((TypeError, ValueError)) as info:
        coat(datum)
    message = str(info.value)
    assert message.startswith("coat()"), message
    assert named in message, message
    assert "Pad the rows" in message or "Convert the values" in message, message


def test_coat_still_converts_what_torch_converts() -> None:
    assert coat([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]]
    assert coat([]).shape == (0,)
