"""A NumPy reader of IDX files (the format of MNIST and Fashion-MNIST), and the Fashion-MNIST set.

IDX layout: two zero bytes, a type byte (0x08 unsigned byte, 0x09 signed byte, 0x0B int16,
0x0C int32, 0x0D float32, 0x0E float64), a byte with the number of dimensions, then each dimension
as a big-endian unsigned 32-bit integer, then the values big-endian in row-major order. Files may be
gzip-compressed (recognised by their first two bytes, whatever their name).

Fashion-MNIST comes from Debian's ``dataset-fashion-mnist`` package, which installs the original
files under ``/usr/share/datasets/fashion-mnist/``; nothing is downloaded.
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np
from numpy.typing import NDArray

from gossipsim.errors import ConfigError

IDX_TYPES: Final[dict[int, str]] = {
    0x08: "u1",
    0x09: "i1",
    0x0B: ">i2",
    0x0C: ">i4",
    0x0D: ">f4",
    0x0E: ">f8",
}
#: Where Debian's dataset-fashion-mnist puts the original files.
FASHION_MNIST_FOLDER: Final = Path("/usr/share/datasets/fashion-mnist")
FASHION_MNIST_FILES: Final[dict[str, str]] = {
    "train_images": "train-images-idx3-ubyte.gz",
    "train_labels": "train-labels-idx1-ubyte.gz",
    "test_images": "t10k-images-idx3-ubyte.gz",
    "test_labels": "t10k-labels-idx1-ubyte.gz",
}
FASHION_MNIST_CLASSES: Final = (
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
)
INSTALL_HINT: Final = (
    "install Debian's dataset-fashion-mnist package (apt install dataset-fashion-mnist), or give "
    "the folder holding the four original .gz files"
)


def read_idx(path: str | Path, *, key: str = "path") -> NDArray[np.generic]:
    """The array stored in the IDX file ``path`` (gzip or not), in native byte order.

    A file that is not IDX, is truncated or has trailing bytes raises :class:`ConfigError` naming
    ``key`` and the file.
    """
    path = Path(path)
    try:
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
    except FileNotFoundError:
        raise ConfigError(key, f"{path} does not exist") from None
    except (OSError, EOFError) as error:
        raise ConfigError(key, f"{path} cannot be read: {error}") from None
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in IDX_TYPES:
        raise ConfigError(key, f"{path} is not an IDX file (no 0x0000 + type-byte header)")
    dimensions = raw[3]
    header = 4 + 4 * dimensions
    if len(raw) < header:
        raise ConfigError(key, f"{path} is truncated inside its header")
    shape = tuple(int(n) for n in np.frombuffer(raw, dtype=">u4", count=dimensions, offset=4))
    dtype = np.dtype(IDX_TYPES[raw[2]])
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(raw) - header != expected:
        raise ConfigError(
            key,
            f"{path} holds {len(raw) - header} bytes of values where its header {shape} of "
            f"{dtype.name} needs {expected} (truncated or damaged)",
        )
    values = np.frombuffer(raw, dtype=dtype, offset=header).reshape(shape)
    return values.astype(dtype.newbyteorder("="))


@dataclass(frozen=True)
class ImageSet:
    """Images ``(n, rows, cols)`` as float64 in [0, 1] and their labels ``(n,)`` as integers."""

    train_images: NDArray[np.float64]
    train_labels: NDArray[np.int64]
    test_images: NDArray[np.float64]
    test_labels: NDArray[np.int64]


def load_fashion_mnist(folder: str | Path | None = None, *, key: str = "data.path") -> ImageSet:
    """The original Fashion-MNIST files from ``folder`` (default :data:`FASHION_MNIST_FOLDER`).

    Missing files raise :class:`ConfigError` naming ``key`` and saying how to install them.
    """
    root = Path(folder) if folder is not None else FASHION_MNIST_FOLDER
    missing = [name for name in FASHION_MNIST_FILES.values() if not (root / name).is_file()]
    if missing:
        raise ConfigError(
            key, f"Fashion-MNIST files not found in {root} ({', '.join(missing)}): " + INSTALL_HINT
        )
    arrays = {name: read_idx(root / file, key=key) for name, file in FASHION_MNIST_FILES.items()}
    for split in ("train", "test"):
        images, labels = arrays[f"{split}_images"], arrays[f"{split}_labels"]
        if images.ndim != 3 or labels.ndim != 1 or images.shape[0] != labels.shape[0]:
            raise ConfigError(
                key,
                f"{root}: the {split} images {images.shape} and labels {labels.shape} do not match",
            )
        if labels.size and (labels.min() < 0 or labels.max() >= len(FASHION_MNIST_CLASSES)):
            raise ConfigError(key, f"{root}: {split} labels outside 0..9")
    return ImageSet(
        train_images=arrays["train_images"].astype(np.float64) / 255.0,
        train_labels=arrays["train_labels"].astype(np.int64),
        test_images=arrays["test_images"].astype(np.float64) / 255.0,
        test_labels=arrays["test_labels"].astype(np.int64),
    )
