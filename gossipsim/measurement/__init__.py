"""From a run's raw record to its rows: divergence traces, convergence and latencies, censoring-aware
estimates, and the exact walk quantities of summary.json."""
