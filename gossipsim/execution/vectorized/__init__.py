"""The vectorized engine: many runs of a variant at once in NumPy, by declaration only (the driver,
the batched-steps kernel, drawn stays, streamed traces), with the event engine's tables."""
