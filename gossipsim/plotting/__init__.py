"""Helpers of :mod:`gossipsim.plots`: one scheme of colours and line styles (:mod:`.style`), the
statistics a figure draws across runs (:mod:`.stats`: median and percentile band, mean and its
confidence interval, ECDFs over all requests), the layout of sweeps (:mod:`.layout`: one panel per
value of the second and later sweep dimensions), and the axes pieces every figure shares
(:mod:`.axes`: a log axis with exact zeros drawn past a break, request slots, legends)."""
