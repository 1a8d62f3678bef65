"""Where runs execute: one run on the event engine, many at once on the vectorized engine, and the
units of work on local processes or a Dask cluster."""
