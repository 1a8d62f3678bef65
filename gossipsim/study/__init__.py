"""The study: scenario files read into validated settings, sweeps, the memory and time budget, and
the key reference of docs/scenarios.md."""
