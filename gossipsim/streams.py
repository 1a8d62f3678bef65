"""The runs' random streams, computed for many runs at once and bit-identical to NumPy's.

Each run's randomness comes from NumPy (:mod:`gossipsim.runner`): its integer seed is
``SeedSequence(scenario_seed, spawn_key=(run,)).generate_state(1, uint64)[0] >> 1`` and stream ``s``
(walk, start, ...) is ``default_rng(SeedSequence(seed, spawn_key=(s,)))``, a PCG64 generator. Setting
these up one run at a time costs tens of microseconds per run, more than a vectorised run itself; this
module computes the same values for a whole batch in NumPy array arithmetic:

- :func:`run_seeds` — the SeedSequence hash (O'Neill's ``seed_seq_fe``, as NumPy implements it) on
  32-bit words held in uint64 arrays;
- :func:`pcg64_origins` — PCG64's seeding (two steps of the 128-bit LCG ``s ← a·s + c``), with 128-bit
  integers as (high, low) pairs of uint64 arrays;
- :func:`pcg64_advance` — jumping ahead ``n`` outputs: ``s_n = aⁿ·s + c·(aⁿ⁻¹ + … + 1)`` (mod 2¹²⁸);
- :func:`first_bounded` — the first ``Generator.integers(n)`` of each run (Lemire's method on the low
  32 bits of the first output), as used for a uniform start node.

Uniforms are then drawn by NumPy itself (:class:`WalkStreams` sets one PCG64's state per run), so the
doubles are NumPy's own. :func:`emulation_exact` checks every one of these against NumPy once per
process; if a future NumPy changed its algorithms, the vectorised engine would fall back to building
each run's generators (slower, still exact).
"""

from __future__ import annotations

from functools import cache

import numpy as np

_MASK32 = 0xFFFFFFFF
_MASK64 = (1 << 64) - 1
_MASK128 = (1 << 128) - 1
# SeedSequence constants (numpy/random/bit_generator.pyx)
_INIT_A, _MULT_A = 0x43B0D7E5, 0x931E8875
_INIT_B, _MULT_B = 0x8B51F9DD, 0x58F38DED
_MIX_MULT_L, _MIX_MULT_R = 0xCA01F9DD, 0x4973F715
_POOL_SIZE = 4
# PCG64's 128-bit LCG multiplier (numpy/random/src/pcg64/pcg64.h)
PCG64_MULTIPLIER = (2549297995355413924 << 64) + 4865540595714422341

Words = list[np.ndarray]  # 32-bit words in uint64 arrays, one array per word position


def _words(value: int) -> list[int]:
    """An integer as little-endian 32-bit words (0 is one word), as SeedSequence splits it."""
    if value < 0:
        raise ValueError("seeds must be non-negative")
    out = []
    while True:
        out.append(value & _MASK32)
        value >>= 32
        if value == 0:
            return out


def _hashmix(value: np.ndarray, hash_const: int) -> tuple[np.ndarray, int]:
    value = value ^ np.uint64(hash_const)
    hash_const = (hash_const * _MULT_A) & _MASK32
    value = (value * np.uint64(hash_const)) & np.uint64(_MASK32)
    return value ^ (value >> np.uint64(16)), hash_const


def _mix(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    # (L·x − R·y) mod 2³²: uint64 arithmetic wraps mod 2⁶⁴, a multiple of 2³²
    difference: np.ndarray = np.uint64(_MIX_MULT_L) * x - np.uint64(_MIX_MULT_R) * y
    result = difference & np.uint64(_MASK32)
    return result ^ (result >> np.uint64(16))


def _pool(entropy: Words) -> Words:
    """SeedSequence.mix_entropy on a batch: the 4-word pool of each entropy word list."""
    shape = entropy[0].shape
    zero = np.zeros(shape, dtype=np.uint64)
    hash_const = _INIT_A
    pool = []
    for i in range(_POOL_SIZE):
        word, hash_const = _hashmix(entropy[i] if i < len(entropy) else zero, hash_const)
        pool.append(word)
    for i_src in range(_POOL_SIZE):
        for i_dst in range(_POOL_SIZE):
            if i_src != i_dst:
                mixed, hash_const = _hashmix(pool[i_src], hash_const)
                pool[i_dst] = _mix(pool[i_dst], mixed)
    for i_src in range(_POOL_SIZE, len(entropy)):
        for i_dst in range(_POOL_SIZE):
            mixed, hash_const = _hashmix(entropy[i_src], hash_const)
            pool[i_dst] = _mix(pool[i_dst], mixed)
    return pool


def _generate_state(pool: Words, n_words32: int) -> Words:
    """SeedSequence.generate_state: ``n_words32`` 32-bit words from the pool."""
    hash_const = _INIT_B
    out = []
    for i in range(n_words32):
        value = pool[i % _POOL_SIZE] ^ np.uint64(hash_const)
        hash_const = (hash_const * _MULT_B) & _MASK32
        value = (value * np.uint64(hash_const)) & np.uint64(_MASK32)
        out.append(value ^ (value >> np.uint64(16)))
    return out


def _spawned_entropy(
    entropy: int | np.ndarray, spawn_words: Words, shape: tuple[int, ...]
) -> Words:
    """The assembled entropy of ``SeedSequence(entropy, spawn_key=key)``: the entropy's words,
    padded with zeros to the pool size (as NumPy does when there is a spawn key), then the key's."""
    if isinstance(entropy, np.ndarray):  # uint64 seeds below 2⁶⁴: two words each
        value = entropy.astype(np.uint64)
        words = [value & np.uint64(_MASK32), value >> np.uint64(32)]
    else:
        words = [np.full(shape, w, dtype=np.uint64) for w in _words(int(entropy))]
    zero = np.zeros(shape, dtype=np.uint64)
    while len(words) < _POOL_SIZE:
        words.append(zero)
    return words + spawn_words


def run_seeds(scenario_seed: int, runs: np.ndarray) -> np.ndarray:
    """The integer seeds of ``runs`` (int array, each < 2³²), as :func:`gossipsim.runner.run_seed`:
    ``SeedSequence(scenario_seed, spawn_key=(r,)).generate_state(1, uint64)[0] >> 1``."""
    runs = np.asarray(runs, dtype=np.uint64)
    entropy = _spawned_entropy(scenario_seed, [runs], runs.shape)
    lo, hi = _generate_state(_pool(entropy), 2)
    return ((hi << np.uint64(32)) | lo) >> np.uint64(1)


# ---- 128-bit arithmetic on (high, low) pairs of uint64 arrays ------------------------------------


def _mul_hi64(a: np.ndarray, b: int) -> np.ndarray:
    """The high 64 bits of the 128-bit product of uint64 ``a`` and the constant ``b`` < 2⁶⁴."""
    mask = np.uint64(_MASK32)
    a0, a1 = a & mask, a >> np.uint64(32)
    b0, b1 = np.uint64(b & _MASK32), np.uint64(b >> 32)
    p00, p01, p10, p11 = a0 * b0, a0 * b1, a1 * b0, a1 * b1
    middle = (p00 >> np.uint64(32)) + (p01 & mask) + (p10 & mask)
    return p11 + (p01 >> np.uint64(32)) + (p10 >> np.uint64(32)) + (middle >> np.uint64(32))


def _mul128(hi: np.ndarray, lo: np.ndarray, constant: int) -> tuple[np.ndarray, np.ndarray]:
    """(hi, lo) × constant mod 2¹²⁸."""
    c_hi, c_lo = constant >> 64, constant & _MASK64
    new_lo = lo * np.uint64(c_lo)
    new_hi = _mul_hi64(lo, c_lo) + hi * np.uint64(c_lo) + lo * np.uint64(c_hi)
    return new_hi, new_lo


def _add128(
    a_hi: np.ndarray, a_lo: np.ndarray, b_hi: np.ndarray, b_lo: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    lo = a_lo + b_lo
    return a_hi + b_hi + (lo < a_lo).astype(np.uint64), lo


class PCG64States:
    """PCG64 states of a batch of runs: the 128-bit state and increment as uint64 (high, low)."""

    def __init__(
        self, state_hi: np.ndarray, state_lo: np.ndarray, inc_hi: np.ndarray, inc_lo: np.ndarray
    ) -> None:
        self.state_hi, self.state_lo = state_hi, state_lo
        self.inc_hi, self.inc_lo = inc_hi, inc_lo

    def __len__(self) -> int:
        return int(self.state_hi.size)

    def step(self) -> PCG64States:
        """One LCG step: ``s ← a·s + c``."""
        hi, lo = _mul128(self.state_hi, self.state_lo, PCG64_MULTIPLIER)
        hi, lo = _add128(hi, lo, self.inc_hi, self.inc_lo)
        return PCG64States(hi, lo, self.inc_hi, self.inc_lo)

    def output(self) -> np.ndarray:
        """PCG64's XSL-RR output of the current state (the value returned after a step)."""
        x = self.state_hi ^ self.state_lo
        rot = self.state_hi >> np.uint64(58)
        return (x >> rot) | (x << ((np.uint64(64) - rot) & np.uint64(63)))

    def as_ints(self, b: int) -> tuple[int, int]:
        """Run ``b``'s (state, increment) as Python integers, for ``PCG64.state``."""
        state = (int(self.state_hi[b]) << 64) | int(self.state_lo[b])
        inc = (int(self.inc_hi[b]) << 64) | int(self.inc_lo[b])
        return state, inc


def pcg64_origins(seeds: np.ndarray, stream: int) -> PCG64States:
    """The PCG64 state of ``default_rng(SeedSequence(seed, spawn_key=(stream,)))`` for each seed
    (uint64 array): seeded from ``generate_state(4, uint64)`` as NumPy's ``pcg64_set_seed``."""
    seeds = np.asarray(seeds, dtype=np.uint64)
    spawn = [np.full(seeds.shape, w, dtype=np.uint64) for w in _words(stream)]
    w = _generate_state(_pool(_spawned_entropy(seeds, spawn, seeds.shape)), 8)
    shift = np.uint64(32)
    v0, v1, v2, v3 = (w[2 * i] | (w[2 * i + 1] << shift) for i in range(4))
    init_hi, init_lo = v0, v1  # initial state: v0·2⁶⁴ + v1; sequence: v2·2⁶⁴ + v3
    inc_hi = (v2 << np.uint64(1)) | (v3 >> np.uint64(63))
    inc_lo = (v3 << np.uint64(1)) | np.uint64(1)
    # srandom: state = 0; step (state = inc); state += initstate; step
    hi, lo = _add128(inc_hi, inc_lo, init_hi, init_lo)
    return PCG64States(hi, lo, inc_hi, inc_lo).step()


@cache
def _jump(n: int) -> tuple[int, int]:
    """(aⁿ, aⁿ⁻¹ + … + a + 1) mod 2¹²⁸ for the PCG64 multiplier a, by repeated squaring."""
    acc_mult, acc_plus = 1, 0
    cur_mult, cur_plus = PCG64_MULTIPLIER, 1
    while n > 0:
        if n & 1:
            acc_mult = (acc_mult * cur_mult) & _MASK128
            acc_plus = (acc_plus * cur_mult + cur_plus) & _MASK128
        cur_plus = ((cur_mult + 1) * cur_plus) & _MASK128
        cur_mult = (cur_mult * cur_mult) & _MASK128
        n >>= 1
    return acc_mult, acc_plus


def pcg64_advance(states: PCG64States, n: int) -> PCG64States:
    """The states ``n`` outputs later: ``s_n = aⁿ·s + c·(aⁿ⁻¹ + … + 1)`` mod 2¹²⁸."""
    mult, plus = _jump(n)
    hi, lo = _mul128(states.state_hi, states.state_lo, mult)
    c_hi, c_lo = _mul128(states.inc_hi, states.inc_lo, plus)
    hi, lo = _add128(hi, lo, c_hi, c_lo)
    return PCG64States(hi, lo, states.inc_hi, states.inc_lo)


def first_bounded(states: PCG64States, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The first ``Generator.integers(n)`` (0 < n < 2³²) of each run, and a mask of the runs where
    Lemire's method rejects that first draw (probability < n / 2³²: redraw those with NumPy)."""
    if not 0 < n <= _MASK32:
        raise ValueError("n must be in 1 .. 2**32 - 1")
    if n == 1:
        return np.zeros(len(states), dtype=np.int64), np.zeros(len(states), dtype=bool)
    low32 = states.step().output() & np.uint64(_MASK32)  # next_uint32: low half of an output
    m = low32 * np.uint64(n)
    leftover = m & np.uint64(_MASK32)
    threshold = ((1 << 32) - n) % n
    return (m >> np.uint64(32)).astype(np.int64), leftover < np.uint64(threshold)


class WalkStreams:
    """The walk uniforms of a batch of runs, exactly as each run's own
    ``default_rng(SeedSequence(seed, spawn_key=(WALK,)))`` would give them to
    :class:`~gossipsim.scheduling.Walker`: uniform number ``i`` is output ``i`` of the stream.

    ``block(first, need)`` returns ``need`` consecutive uniforms from output ``first`` for every run
    (runs × need): one PCG64's state is set per run and NumPy draws the doubles.
    """

    def __init__(self, seeds: np.ndarray, stream: int) -> None:
        self.seeds = np.asarray(seeds, dtype=np.uint64)
        self.exact = emulation_exact()
        if self.exact:
            self.origins = pcg64_origins(self.seeds, stream)
        self.stream = stream
        self._bit_generator = np.random.PCG64(0)
        self._generator = np.random.Generator(self._bit_generator)
        self._words = _state_words(self._bit_generator)

    def block(self, first: int, need: int) -> np.ndarray:
        out = np.empty((self.seeds.size, need))
        bg, gen = self._bit_generator, self._generator
        if not self.exact:  # NumPy's own seeding, run by run
            for b, seed in enumerate(self.seeds.tolist()):
                bg = np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(self.stream,)))
                bg.advance(first)
                out[b] = np.random.Generator(bg).random(need)
            return out
        states = pcg64_advance(self.origins, first) if first else self.origins
        if self._words is not None:  # write each run's state into the generator directly
            words = np.stack([states.state_lo, states.state_hi, states.inc_lo, states.inc_hi], 1)
            view = self._words
            for b in range(self.seeds.size):
                view[:] = words[b]
                gen.random(out=out[b])
            return out
        for b in range(self.seeds.size):  # through PCG64.state (a few microseconds per run)
            state, inc = states.as_ints(b)
            bg.state = {
                "bit_generator": "PCG64",
                "state": {"state": state, "inc": inc},
                "has_uint32": 0,
                "uinteger": 0,
            }
            gen.random(out=out[b])
        return out


def _state_words(bit_generator: np.random.PCG64) -> np.ndarray | None:
    """A uint64 view of the generator's 128-bit state and increment (low, high, low, high), found
    through ``ctypes.state_address`` and verified by reading ``state`` back; None if the layout is
    not that one (then the state is set through the ``state`` property)."""
    import ctypes

    try:
        pointer = ctypes.cast(bit_generator.ctypes.state_address, ctypes.POINTER(ctypes.c_void_p))
        address = pointer.contents.value  # pcg64_state holds a pointer to the LCG's 32 bytes
        if not address:
            return None
        words = np.ctypeslib.as_array(ctypes.cast(address, ctypes.POINTER(ctypes.c_uint64)), (4,))
        saved = bit_generator.state
        state, inc = (3 << 64) | 5, (7 << 64) | 9
        words[:] = (5, 3, 9, 7)
        ok = bit_generator.state["state"] == {"state": state, "inc": inc}
        bit_generator.state = saved
        return words if ok else None
    except Exception:
        return None


@cache
def emulation_exact() -> bool:
    """Whether this module reproduces NumPy's SeedSequence, PCG64 seeding, advancing and bounded
    integers (checked once per process on a few seeds)."""
    try:
        scenario_seed, runs = 2023, np.array([0, 1, 77, 4_000_000_000])
        seeds = run_seeds(scenario_seed, runs)
        for r, seed in zip(runs.tolist(), seeds.tolist(), strict=True):
            seq = np.random.SeedSequence(scenario_seed, spawn_key=(r,))
            if int(seq.generate_state(1, np.uint64)[0] >> np.uint64(1)) != seed:
                return False
        origins = pcg64_origins(seeds, 3)
        later = pcg64_advance(origins, 8195)
        starts, _ = first_bounded(origins, 10)
        for b, seed in enumerate(seeds.tolist()):
            bg = np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(3,)))
            if bg.state["state"]["state"] != origins.as_ints(b)[0]:
                return False
            if int(np.random.Generator(bg).integers(10)) != int(starts[b]):
                return False
            bg = np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(3,)))
            bg.advance(8195)
            if (bg.state["state"]["state"], bg.state["state"]["inc"]) != later.as_ints(b):
                return False
        return True
    except Exception:  # any surprise: use NumPy run by run
        return False
