"""Helpers of :mod:`gossipsim.figures.plots`: one scheme of colours, line styles and fonts (:mod:`.style`),
the statistics a figure draws across runs (:mod:`.stats`: median and percentile band, mean and its
confidence interval), the layout of sweeps (:mod:`.layout`: one panel per value of the second and
later sweep dimensions, grids by the sweep's factors), the axes pieces every figure shares
(:mod:`.axes`: a log axis with exact zeros drawn past a break, request slots and their names,
wrapped text, legends that fit), figures made without pyplot (:mod:`.canvas`: drawn into a
caller's axes, shown by a notebook) and the requests of a latency figure (:mod:`.requests`: their
censoring and expected latency)."""
