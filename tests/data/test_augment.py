"""Augmentations: seeded reproducibility, sequence consistency, array/tensor layouts."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from scramjet.data import augment as A

RANDOM_OPS = [
    A.Flip(horizontal=True, vertical=True, p=0.5),
    A.Crop(area=(0.3, 0.9), ratio=(0.5, 2.0)),
    A.Rotate(30),
    A.Brighten(0.3),
    A.Contrast(0.3),
    A.Saturate(0.5),
    A.Hue(0.2),
    A.Blur((0.5, 2.0), p=1.0),
    A.Noise((0.02, 0.1)),
]
ALL_OPS = [*RANDOM_OPS, A.Resize((20, 24)), A.Normalize([0.5] * 3, [0.25] * 3)]


def image(seed=0, h=24, w=32):
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([x * 7 % 256, y * 9 % 256, (x + y) * 5 % 256], -1)
    return np.clip(base + rng.integers(0, 30, (h, w, 3)), 0, 255).astype(np.uint8)


@pytest.mark.parametrize("op", ALL_OPS, ids=lambda o: type(o).__name__)
def test_reproducible_from_seed_and_index(op):
    img = image()
    aug = A.Compose(op, seed=11)
    out1, out2 = aug(img, index=4), aug(img, index=4, epoch=0)
    np.testing.assert_array_equal(out1, out2)
    if isinstance(op, (A.Resize, A.Normalize)):
        return
    outs = [aug(img, index=i) for i in range(8)]
    assert any(not np.array_equal(outs[0], o) for o in outs[1:]), "draws never change"
    gen_a, gen_b = np.random.default_rng(3), np.random.default_rng(3)
    np.testing.assert_array_equal(op(img, rng=gen_a), op(img, rng=gen_b))


@pytest.mark.parametrize("op", ALL_OPS, ids=lambda o: type(o).__name__)
def test_same_parameters_for_every_frame(op):
    frame = image(1)
    seq = np.stack([frame] * 5)  # T x H x W x C, identical frames
    out = A.Compose(op, seed=2)(seq, index=9)
    assert out.shape[0] == 5
    for t in range(1, 5):
        np.testing.assert_array_equal(out[t], out[0])
    single = A.Compose(op, seed=2)(frame, index=9)
    np.testing.assert_allclose(np.asarray(out[0], np.float32), np.asarray(single, np.float32))


@pytest.mark.parametrize("op", ALL_OPS, ids=lambda o: type(o).__name__)
def test_arrays_and_tensors_agree(op):
    img = image(2)
    arr_out = op(img, rng=np.random.default_rng(5))
    chw = torch.from_numpy(img).permute(2, 0, 1).contiguous()
    ten_out = op(chw, rng=np.random.default_rng(5))
    assert isinstance(ten_out, torch.Tensor) and isinstance(arr_out, np.ndarray)
    np.testing.assert_allclose(
        ten_out.permute(1, 2, 0).numpy().astype(np.float32), arr_out.astype(np.float32), atol=1e-4
    )
    if not isinstance(op, A.Normalize):
        assert arr_out.dtype == np.uint8 and ten_out.dtype == torch.uint8
    float_out = op(chw.float() / 255, rng=np.random.default_rng(5))
    assert float_out.dtype == torch.float32


def test_op_semantics():
    img = image(3)
    flipped = A.Flip(p=1.0)(img)
    np.testing.assert_array_equal(flipped, img[:, ::-1])
    np.testing.assert_array_equal(A.Rotate((0, 0))(img), img)
    np.testing.assert_array_equal(A.Brighten((1, 1))(img), img)
    assert A.Brighten((2, 2))(img).astype(int).sum() > img.astype(int).sum()
    gray = A.Saturate((0, 0))(img).astype(int)
    assert np.abs(gray[..., 0] - gray[..., 1]).max() <= 1
    assert A.Crop(area=(0.2, 0.3), size=(8, 10))(img).shape == (8, 10, 3)
    assert A.Resize(16)(img).shape == (16, 16, 3)
    norm = A.Normalize([0.5] * 3, [0.5] * 3)(img)
    assert norm.dtype == np.float32 and norm.min() >= -1.0 and norm.max() <= 1.0
    assert A.Blur((1.5, 1.5), p=1.0)(img).astype(float).std() < img.astype(float).std()
    with pytest.raises(ValueError, match="area"):
        A.Crop(area=(0.5, 2.0))
    with pytest.raises(TypeError, match="numpy HWC array or a torch CHW tensor"):
        A.Flip()([1, 2, 3])


def test_sample_theta_picks_one_frame_per_window():
    seq = np.stack([np.full((4, 4, 3), t, np.uint8) for t in range(10)])
    for seed in range(10):
        out = A.Sample(3, seed=seed)(seq, index=0)
        picked = out[:, 0, 0, 0].tolist()
        assert len(picked) == 4  # windows [0,3) [3,6) [6,9) [9,10)
        assert [p // 3 for p in picked] == [0, 1, 2, 3]
    assert A.Sample(3, jitter=False)(seq)[:, 0, 0, 0].tolist() == [0, 3, 6, 9]
    draws = {tuple(A.Sample(3, seed=1)(seq, index=i)[:, 0, 0, 0]) for i in range(20)}
    assert len(draws) > 1
    tensor_seq = torch.from_numpy(seq).permute(0, 3, 1, 2)
    assert A.Sample(2, jitter=False)(tensor_seq).shape == (5, 3, 4, 4)
    with pytest.raises(ValueError, match="sequences"):
        A.Sample(2)(seq[0])


def test_sequence_pipeline_consistent_across_frames():
    frames = np.stack([image(7)] * 8)
    aug = A.Compose(A.Sample(2), A.Crop(area=(0.4, 0.8)), A.Rotate(20), A.Hue(0.1), seed=4)
    out = aug(frames, index=1)
    assert out.shape[0] == 4
    assert all(np.array_equal(out[0], out[t]) for t in range(4))


def test_sample_context_supplies_index_and_epoch():
    img = image()
    aug = A.Compose(A.Flip(p=0.5), A.Noise(0.1), seed=4)
    with A.sample_context(6, epoch=2):
        first, second = aug(img), aug(img)  # like aug(img, index=6, epoch=2), then the next
        explicit = aug(img, index=3)  # an explicit index wins over the context
    np.testing.assert_array_equal(first, aug(img, index=6, epoch=2))
    assert not np.array_equal(first, second)  # two views of one sample differ...
    with A.sample_context(6, epoch=2):
        again = [aug(img), aug(img)]
    np.testing.assert_array_equal(again[0], first)  # ...reproducibly
    np.testing.assert_array_equal(again[1], second)
    np.testing.assert_array_equal(explicit, aug(img, index=3))
    with A.sample_context(7, epoch=2):
        assert not np.array_equal(aug(img), first)
    outside = A.Compose(A.Noise(0.1), seed=4)
    assert not np.array_equal(outside(img), outside(img))  # no context: one generator
