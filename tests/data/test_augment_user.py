"""Augmentations as a vision user meets them: odd inputs, ranges, parameters, errors."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from scramjet.data import augment as A


def image(seed: int = 0, h: int = 12, w: int = 16, c: int = 3) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (h, w, c), dtype=np.uint8)


# -- RGBA and gray + alpha ------------------------------------------------------------------


@pytest.mark.parametrize(
    "op",
    [A.Brighten((1.4, 1.4)), A.Contrast((0.5, 0.5)), A.Saturate((0.3, 0.3)), A.Hue((0.3, 0.3))],
)
def test_colour_augmentations_change_rgba_colours_and_keep_alpha(op):
    rgba = image(c=4)
    out = op(rgba)
    assert out.shape == rgba.shape and out.dtype == np.uint8
    np.testing.assert_array_equal(out[..., 3], rgba[..., 3])
    np.testing.assert_array_equal(out[..., :3], op(np.ascontiguousarray(rgba[..., :3])))


@pytest.mark.parametrize("op", [A.Brighten((1.4, 1.4)), A.Contrast((0.5, 0.5))])
def test_colour_augmentations_keep_the_alpha_of_gray_alpha_images(op):
    la = image(c=2)
    out = op(la)
    np.testing.assert_array_equal(out[..., 1], la[..., 1])
    np.testing.assert_array_equal(out[..., :1], op(np.ascontiguousarray(la[..., :1])))


def test_saturate_on_five_channels_says_what_it_takes():
    with pytest.raises(
        ValueError, match=r"1 \(gray\).*4 \(RGBA\).*received 5 channels.*x\[..., :3\]"
    ):
        A.Saturate(0.5)(image(c=5))


# -- value ranges ---------------------------------------------------------------------------


def test_uint16_images_saturate_instead_of_wrapping_around():
    x = np.full((4, 4, 3), 60000, np.uint16)
    out = A.Brighten((1.5, 1.5))(x)
    assert out.dtype == np.uint16
    assert (out == 65535).all()  # wrapped to 24464 before


def test_signed_integer_tensors_saturate_at_their_dtype_limits():
    x = torch.full((3, 4, 4), 30000, dtype=torch.int16)
    assert (A.Brighten((1.5, 1.5))(x) == 32767).all()


def test_uint16_noise_and_normalize_use_the_16_bit_range():
    x = np.full((8, 8, 1), 32768, np.uint16)
    out = A.Normalize([0.0], [1.0])(x)
    np.testing.assert_allclose(out, 32768 / 65535, rtol=1e-6)
    noisy = A.Noise((0.05, 0.05), seed=0)(x, index=0).astype(float)
    assert 0.03 * 65535 < noisy.std() < 0.07 * 65535  # 0.05 levels before: no noise at all


@pytest.mark.parametrize(
    "op",
    [
        A.Brighten((1.5, 1.5)),
        A.Contrast((2.0, 2.0)),
        A.Saturate((3.0, 3.0)),
        A.Hue((0.3, 0.3)),
        A.Noise((0.3, 0.3)),
    ],
)
def test_float_images_in_unit_range_stay_in_unit_range(op):
    x = torch.rand(3, 16, 16, generator=torch.Generator().manual_seed(0))
    out = op(x, rng=np.random.default_rng(0))
    assert out.dtype == torch.float32
    assert float(out.min()) >= 0.0 and float(out.max()) <= 1.0
    # the same as the uint8 path, which clips at 0 and 255
    u8 = op((x * 255).round().to(torch.uint8), rng=np.random.default_rng(0))
    if not isinstance(op, A.Noise):
        assert (out * 255 - u8.float()).abs().max() <= 3


def test_float_images_outside_unit_range_are_not_clipped():
    x = torch.linspace(-2, 2, 3 * 4 * 4).reshape(3, 4, 4)  # already normalized data
    torch.testing.assert_close(A.Brighten((1.5, 1.5))(x), x * 1.5)


def test_augmentations_after_normalize_are_not_clipped_to_unit_range():
    img = image()
    out = A.Compose(A.Normalize([0.5], [0.1]), A.Brighten((2.0, 2.0)))(img)
    np.testing.assert_allclose(out, (img / 255 - 0.5) / 0.1 * 2, atol=1e-4)


# -- parameters: refused when the augmentation is made, with what to pass ------------------


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: A.Rotate("15"), r"degrees.*received '15'"),  # was read as (1.0, 5.0)
        (lambda: A.Rotate((10,)), r"degrees.*\(low, high\) pair.*received \(10,\)"),
        (lambda: A.Rotate((1, 2, 3)), r"degrees.*\(low, high\) pair.*received \(1, 2, 3\)"),
        (lambda: A.Rotate(float("nan")), r"degrees.*finite.*received nan"),
        (lambda: A.Rotate(float("inf")), r"degrees.*finite.*received inf"),
        (lambda: A.Rotate(-15), r"degrees.*received -15.*\(-d, d\)"),
        (lambda: A.Brighten(None), r"factor.*received None"),
        (lambda: A.Hue((0.1, None)), r"shift.*received \(0.1, None\)"),
        (lambda: A.Blur(float("nan")), r"sigma.*finite.*received nan"),
        (lambda: A.Noise(float("nan")), r"std.*finite.*received nan"),
        (lambda: A.Flip(p=None), r"p must be a probability.*received None"),
        (lambda: A.Crop(p="0.5"), r"p must be a probability.*received '0.5'"),
        (lambda: A.Blur(p=float("nan")), r"p must be a probability.*received nan"),
        (lambda: A.Flip(seed=-1), r"seed must be an int >= 0 or None.*received -1"),
        (lambda: A.Compose(A.Flip(), seed="a"), r"seed must be an int >= 0.*received 'a'"),
        (lambda: A.Compose(A.Flip(), seed=1.5), r"seed must be an int >= 0.*received 1.5"),
        (lambda: A.Normalize(0.5, 0.2), r"mean must be.*numbers.*received 0.5"),
        (lambda: A.Normalize([0.5, 0.5], [0.2, 0.2, 0.2]), r"2 mean values and 3 std"),
        (lambda: A.Normalize([0.5], [float("nan")]), r"std values must be finite and > 0"),
        (lambda: A.Sample(True), r"theta must be a positive int.*received True"),
    ],
)
def test_bad_parameters_are_refused_when_made_saying_what_was_received(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_numpy_scalars_are_accepted_as_parameters():
    assert A.Rotate(np.float32(10)).degrees == (-10.0, 10.0)
    assert A.Blur(np.float32(1.5), p=np.float64(1.0)).sigma == (1.5, 1.5)
    assert A.Noise(np.float32(0.25)).std == (0.0, 0.25)
    assert A.Brighten(np.array([0.5, 1.5])).factor == (0.5, 1.5)
    assert A.Sample(np.int64(2)).theta == 2
    assert A.Flip(seed=np.int64(3)).seed == 3


@pytest.mark.parametrize(("index", "epoch"), [(-1, 0), (0, -1), (1.5, 0)])
def test_a_negative_or_fractional_index_or_epoch_is_a_clear_error(index, epoch):
    aug = A.Compose(A.Flip(), seed=0)
    with pytest.raises((ValueError, TypeError), match=r"(index|epoch) must be an int >= 0"):
        aug(image(), index=index, epoch=epoch)
    with (
        pytest.raises((ValueError, TypeError), match=r"(index|epoch) must be an int >= 0"),
        A.sample_context(index, epoch),
    ):
        pass


def test_index_given_as_numpy_int_or_tensor_draws_as_the_int():
    aug = A.Compose(A.Crop(), A.Brighten(0.3), seed=0)
    ref = aug(image(), index=5, epoch=1)
    np.testing.assert_array_equal(aug(image(), index=np.int64(5), epoch=np.int32(1)), ref)
    np.testing.assert_array_equal(aug(image(), index=torch.tensor(5), epoch=1), ref)


def test_a_sample_dict_or_a_2d_array_gets_an_error_that_says_how_to_fix_it():
    with pytest.raises(TypeError, match=r"sample dict.*transform=\{'image': aug\}"):
        A.Flip()({"image": image()})
    with pytest.raises(ValueError, match=r"shape \(12, 16\).*x\[..., None\]"):
        A.Flip()(image()[:, :, 0])


# -- seeds ----------------------------------------------------------------------------------


def test_compose_without_a_seed_warns_that_the_seeds_of_its_ops_are_not_used():
    with pytest.warns(UserWarning, match=r"Flip\(seed=1\).*not used.*Compose\(\.\.\., seed=1\)"):
        aug = A.Compose(A.Flip(seed=1), A.Crop())
    # what the warning says: the draws are fresh every call, whatever the index
    outs = {aug(image(), index=0).tobytes() for _ in range(20)}
    assert len(outs) > 1


def test_compose_with_a_seed_or_ops_without_seeds_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        A.Compose(A.Flip(), A.Crop())
        A.Compose(A.Flip(), A.Crop(), seed=3)
        A.Compose(A.Flip(seed=2), seed=3)  # the Compose's seed is used, as documented


# -- tensors on another device --------------------------------------------------------------

ALL_OPS = [
    A.Flip(p=1.0),
    A.Crop(),
    A.Rotate(),
    A.Brighten(),
    A.Contrast(),
    A.Saturate(),
    A.Hue(),
    A.Blur(p=1.0),
    A.Noise(),
    A.Resize(5),
    A.Normalize([0.5], [0.2]),
]


@pytest.mark.parametrize("op", ALL_OPS, ids=lambda op: type(op).__name__)
def test_tensors_on_another_device_are_augmented_there(op):
    # the meta device stands in for a GPU: mixing it with CPU tensors fails as CUDA does
    x = torch.zeros(3, 8, 8, dtype=torch.uint8, device="meta")
    out = op(x, index=0)
    assert out.device.type == "meta"


@pytest.mark.gpu
@pytest.mark.parametrize("op", ALL_OPS, ids=lambda op: type(op).__name__)
def test_cuda_tensors_give_the_cpu_result(op):
    x = torch.from_numpy(image()).permute(2, 0, 1).contiguous()
    cpu = op(x, rng=np.random.default_rng(0))
    gpu = op(x.cuda(), rng=np.random.default_rng(0))
    assert gpu.is_cuda
    torch.testing.assert_close(gpu.cpu().float(), cpu.float(), atol=1.0, rtol=0)


def test_a_read_only_array_from_pillow_is_augmented_without_a_torch_warning():
    from PIL import Image

    arr = np.asarray(Image.fromarray(image()))
    assert not arr.flags.writeable
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = A.Flip(p=1.0)(arr)
    np.testing.assert_array_equal(out, arr[:, ::-1])


# -- Hue turns the way the colour wheel does --------------------------------------------------


@pytest.mark.parametrize("rgb", [(255, 0, 0), (0, 200, 0), (0, 0, 255), (200, 120, 40)])
@pytest.mark.parametrize("shift", [0.05, 0.15])
def test_a_positive_hue_shift_turns_red_towards_yellow_as_hsv_hue_does(rgb, shift):
    import colorsys

    x = np.array(rgb, np.uint8).reshape(1, 1, 3)
    out = A.Hue((shift, shift))(x)[0, 0]
    before = colorsys.rgb_to_hsv(*(v / 255 for v in rgb))[0]
    after = colorsys.rgb_to_hsv(*(float(v) / 255 for v in out))[0]
    moved = (after - before + 0.5) % 1 - 0.5  # signed, in turns
    assert 0.3 * shift < moved < 2.5 * shift  # the direction; YIQ is not HSV, so roughly


# -- images: a damaged frame read back ------------------------------------------------------


def test_a_damaged_frame_read_with_verify_false_names_the_sample_and_the_shard(tmp_path):
    import json

    import h5py
    from PIL import Image

    from scramjet.data import PackedDataset, PackFormatError, pack

    for i in range(4):
        Image.fromarray(image(i)).save(tmp_path / f"{i}.png")
    (tmp_path / "list.tsv").write_text(
        "image\tlabel\n" + "".join(f"{i}.png\t{i}\n" for i in range(4))
    )
    dst = tmp_path / "p.pack"
    pack(
        tmp_path,
        tmp_path / "list.tsv",
        dst,
        dtype=["int64"],
        height=12,
        width=16,
        encode="png",
        progress=False,
        workers=0,
    )
    shard = dst / json.loads((dst / "manifest.json").read_text())["shards"][0]["file"]
    with h5py.File(shard, "r+") as f:
        offsets = f["_offsets"]["image"][...] if isinstance(f["_offsets"], h5py.Group) else None
        data = f["image"][...]
        start = int(offsets[0]) if offsets is not None else 0
        data[start + 60 : start + 120] ^= 0xFF  # inside the first frame's pixel data
        f["image"][...] = data
    ds = PackedDataset(dst, verify=False)
    with pytest.raises(PackFormatError, match=r"(?s)sample 0 .*shard"):
        ds[0]
    with pytest.raises(PackFormatError, match=r"(?s)sample 0 .*shard"):  # in a batch too
        ds.get_batch([2, 0])


# -- Crop keeps its aspect-ratio range on wide and tall images -------------------------------


@pytest.mark.parametrize("shape", [(64, 256), (256, 64), (10, 100)])
def test_crop_on_a_wide_or_tall_image_keeps_the_ratio_range_when_no_area_fits(shape):
    h, w = shape
    cols = np.broadcast_to(np.arange(w, dtype=np.uint8)[None, :, None], (h, w, 3)).copy()
    rows = np.broadcast_to(np.arange(h, dtype=np.uint8)[:, None, None], (h, w, 3)).copy()
    crop = A.Crop(area=(0.5, 1.0), ratio=(3 / 4, 4 / 3), seed=0)
    lefts = set()
    for i in range(40):
        x = crop(cols, index=i)  # the same size as the input: resized back
        y = crop(rows, index=i)
        width = int(x.max()) - int(x.min()) + 1  # columns of the source inside the crop
        height = int(y.max()) - int(y.min()) + 1
        assert 3 / 4 - 0.1 <= width / height <= 4 / 3 + 0.1, (width, height)
        lefts.add((int(x.min()), int(y.min())))
    assert len(lefts) > 5  # placed at random, not always the same window


# -- Blur on thin images ------------------------------------------------------------------


def _gauss_reference(img: np.ndarray, sigma: float) -> np.ndarray:
    """Separable Gaussian with reflect padding, each axis's radius capped by its size."""
    out = img.astype(float)
    for axis in (1, 0):
        r = min(int(np.ceil(3 * sigma)), out.shape[axis] - 1)
        if r < 1:
            continue
        x = np.arange(-r, r + 1)
        k = np.exp(-(x**2) / (2 * sigma**2))
        k /= k.sum()
        pad = [(0, 0)] * 3
        pad[axis] = (r, r)
        padded = np.pad(out, pad, mode="reflect")
        acc = np.zeros_like(out)
        for j, kv in enumerate(k):
            sl = [slice(None)] * 3
            sl[axis] = slice(j, j + out.shape[axis])
            acc += kv * padded[tuple(sl)]
        out = acc
    return np.round(out)


@pytest.mark.parametrize("shape", [(1, 40), (3, 40), (40, 2), (20, 30)])
def test_blur_blurs_each_axis_as_far_as_that_axis_allows(shape):
    img = image(h=shape[0], w=shape[1])
    out = A.Blur((2.0, 2.0), p=1.0)(img)
    np.testing.assert_array_equal(out.astype(float), _gauss_reference(img, 2.0))
