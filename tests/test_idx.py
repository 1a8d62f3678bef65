"""The IDX reader and the Fashion-MNIST loader on tiny files written here (issue 22, item 9)."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np
import pytest

from gossipsim.data.idx import (
    FASHION_MNIST_FILES,
    FASHION_MNIST_FOLDER,
    load_fashion_mnist,
    read_idx,
)
from gossipsim.errors import ConfigError

TYPE_CODES = {"u1": 0x08, "i1": 0x09, ">i2": 0x0B, ">i4": 0x0C, ">f4": 0x0D, ">f8": 0x0E}


def idx_bytes(array: np.ndarray, dtype: str) -> bytes:
    """The IDX encoding of ``array`` written from the format's description."""
    header = bytes([0, 0, TYPE_CODES[dtype], array.ndim])
    header += b"".join(struct.pack(">I", n) for n in array.shape)
    return header + np.asarray(array, dtype=dtype).tobytes()


@pytest.mark.parametrize("dtype", sorted(TYPE_CODES))
@pytest.mark.parametrize("compress", [False, True])
def test_read_idx_round_trips_every_type(tmp_path: Path, dtype: str, compress: bool) -> None:
    offset = 0 if dtype == "u1" else 7  # negative values where the type has them
    values = (np.arange(24).reshape(2, 3, 4) - offset).astype(dtype)
    data = idx_bytes(values, dtype)
    path = tmp_path / "x.idx"
    path.write_bytes(gzip.compress(data) if compress else data)
    got = read_idx(path)
    np.testing.assert_array_equal(got, values)
    assert got.dtype.isnative


@pytest.mark.parametrize(
    "content,message",
    [
        (b"\x00\x01\x08\x01", "not an IDX file"),
        (b"\x00\x00\x07\x01\x00\x00\x00\x01\x05", "not an IDX file"),
        (b"\x00\x00\x08\x02\x00\x00", "truncated inside its header"),
        (idx_bytes(np.zeros((3, 4), "u1"), "u1")[:-1], "truncated or damaged"),
        (idx_bytes(np.zeros((3, 4), "u1"), "u1") + b"\x00", "truncated or damaged"),
        (b"\x00\x00\x08\x03" + b"\xff\xff\xff\xff" * 3, "truncated or damaged"),
    ],
)
def test_damaged_idx_files_are_one_line(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "bad.idx"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=message) as error:
        read_idx(path, key="data.path")
    assert str(error.value).startswith("data.path: ")
    assert "\n" not in str(error.value)
    gz = tmp_path / "bad.gz"
    gz.write_bytes(gzip.compress(content)[:-3])
    with pytest.raises(ConfigError, match="cannot be read|not an IDX|truncated"):
        read_idx(gz)


def _write_fashion_folder(folder: Path, train: int = 6, test: int = 4) -> None:
    rng = np.random.default_rng(40)
    arrays = {
        "train_images": rng.integers(0, 256, size=(train, 28, 28)).astype("u1"),
        "train_labels": rng.integers(0, 10, size=train).astype("u1"),
        "test_images": rng.integers(0, 256, size=(test, 28, 28)).astype("u1"),
        "test_labels": rng.integers(0, 10, size=test).astype("u1"),
    }
    for name, file in FASHION_MNIST_FILES.items():
        (folder / file).write_bytes(gzip.compress(idx_bytes(arrays[name], "u1")))


def test_load_fashion_mnist_from_a_folder(tmp_path: Path) -> None:
    _write_fashion_folder(tmp_path)
    images = load_fashion_mnist(tmp_path)
    assert images.train_images.shape == (6, 28, 28) and images.test_labels.shape == (4,)
    assert images.train_images.min() >= 0.0 and images.train_images.max() <= 1.0
    raw = read_idx(tmp_path / FASHION_MNIST_FILES["train_images"])
    np.testing.assert_array_equal(images.train_images * 255.0, raw)


def test_missing_or_mismatched_fashion_files_say_how_to_install(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="apt install dataset-fashion-mnist") as error:
        load_fashion_mnist(tmp_path / "nowhere")
    assert str(error.value).startswith("data.path: ")
    _write_fashion_folder(tmp_path)
    labels = tmp_path / FASHION_MNIST_FILES["train_labels"]
    labels.write_bytes(gzip.compress(idx_bytes(np.zeros(5, "u1"), "u1")))
    with pytest.raises(ConfigError, match="do not match"):
        load_fashion_mnist(tmp_path)


@pytest.mark.skipif(
    not (FASHION_MNIST_FOLDER / FASHION_MNIST_FILES["train_labels"]).is_file(),
    reason="Debian's dataset-fashion-mnist is not installed",
)
def test_the_installed_fashion_mnist_files() -> None:
    images = load_fashion_mnist()
    assert images.train_images.shape == (60_000, 28, 28)
    assert images.test_images.shape == (10_000, 28, 28)
    # The first training labels of Fashion-MNIST (its README): ankle boot, T-shirt, T-shirt, dress.
    assert images.train_labels[:4].tolist() == [9, 0, 0, 3]
    assert np.bincount(images.train_labels).tolist() == [6000] * 10
