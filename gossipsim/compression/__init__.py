"""Compression of particle updates under a bit budget, as pure functions on arrays (paper 000,
Section III): the bits an upload costs under each sparsification scheme (eqs. 9-11) and the
largest sparsity that fits a budget (:mod:`.bits`), top-k sparsification per particle, shared by
all particles or by groups of them (:mod:`.sparsify`), and stochastic quantization (eqs. 12-13,
:mod:`.quantize`); an upload encoded as positions and quantized values and decoded
(:mod:`.encoding`); error feedback (:mod:`.feedback`).

Every function takes arrays whose leading axes are batch axes (``(..., N_p, d)`` updates, e.g.
runs × particles × coordinates); randomness comes in as uniforms or a caller's generators, never
from global state.
"""

from gossipsim.compression.bits import (
    SCHEMES,
    groups_of,
    largest_k,
    position_bits,
    upload_bits,
)
from gossipsim.compression.encoding import EncodedUpdate, decode, encode
from gossipsim.compression.feedback import feedback_step
from gossipsim.compression.quantize import magnitude_levels, quantize, quantize_with
from gossipsim.compression.sparsify import patterns, sparsify, top_k_mask

__all__ = [
    "SCHEMES",
    "EncodedUpdate",
    "decode",
    "encode",
    "feedback_step",
    "groups_of",
    "largest_k",
    "magnitude_levels",
    "patterns",
    "position_bits",
    "quantize",
    "quantize_with",
    "sparsify",
    "top_k_mask",
    "upload_bits",
]
