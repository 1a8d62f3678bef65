"""``gossipsim run``: a scenario file (with its ``--set`` keys) run into a results folder, and the
report it prints: what was written, the engine of each variant, the cover and convergence of its
runs and each unlearning request's latencies beside their exact expectations."""

from __future__ import annotations

import argparse
import errno
import math
import re
import sys
import tomllib
from pathlib import Path
from typing import Any

from gossipsim.cli.exits import EXIT_FAILED, EXIT_INTERRUPTED, error_line, warn_nonfinite
from gossipsim.core.textfiles import checked_path
from gossipsim.errors import ConfigError

# OS errors that mean the results folder cannot be written (not a bug): one line, not a traceback
DISK_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EIO}


_BARE_WORD = re.compile(r"[^\s\"'\[\]{}=#,]+")


def parse_set(text: str) -> tuple[str, Any]:
    """``--set KEY=VALUE``: the dotted key and its value, read as a TOML value (``50``, ``0.5``,
    ``true``, ``"ring"``, ``[1, 2]``, ``{ a = 1 }``); a bare word that is no TOML value
    (``uniform``, ``per-run``) is that string."""
    key, eq, value = text.partition("=")
    key, value = key.strip(), value.strip()
    if not eq or not key:
        raise ConfigError("--set", f"must be KEY=VALUE, e.g. topology.nodes=50 (got {text!r})")
    try:
        return key, tomllib.loads(f"v = {value}")["v"]
    except tomllib.TOMLDecodeError:
        if _BARE_WORD.fullmatch(value):
            return key, value
        raise ConfigError(
            "--set",
            f"{key}: {value!r} is not a TOML value (quote strings with spaces or symbols: "
            f"{key}='\"...\"')",
        ) from None


def run_command(args: argparse.Namespace) -> int:
    from gossipsim.api import run, standard_figures
    from gossipsim.results.results import PostProcessingError
    from gossipsim.results.writing import table_formats
    from gossipsim.study.scenario import load_scenario

    if args.out is not None and not args.out.strip():
        raise ConfigError("--out", "must name a folder (got an empty name)")
    if args.cluster is not None and args.workers is not None:
        raise ConfigError(
            "--cluster",
            "cannot be combined with --workers: the cluster's workers run the sweep; give one of them",
        )
    table_formats(args.tables, key="--tables")  # pyarrow, before anything runs
    study = load_scenario(args.file)
    if args.set:
        study = study.replace(dict(parse_set(text) for text in args.set))
    out = checked_path(args.out, "--out") if args.out else Path("results") / study.name
    # auto: a bar when stderr is a terminal (decided here, so that a piped run never imports tqdm)
    progress = {"auto": sys.stderr.isatty(), "on": True, "off": False}[args.progress]

    from gossipsim.core.libwarnings import HELD

    try:
        with HELD.holding() as held:
            results = run(
                study, runs=args.runs, seed=args.seed, workers=args.workers or 1,
                cluster=args.cluster, engine=args.engine, out=out, resume=args.resume,
                make_plots=None if args.no_plots else standard_figures(args.format, args.statistic),
                plots=not args.no_plots, progress=progress, tables=args.tables,
                allow_code_change=args.allow_code_change,
            )  # fmt: skip
    except PostProcessingError as exc:
        warn_nonfinite(exc.results.nonfinite_values(), held)
        _report(exc.results, out, tables_written=exc.tables_written)
        error_line(str(exc))
        return EXIT_INTERRUPTED if exc.interrupted else EXIT_FAILED
    except OSError as exc:  # the disk filled up (or became read-only) while committing runs
        if exc.errno not in DISK_ERRORS:
            raise
        kept = _runs_kept(out)
        if kept:
            error_line(
                f"cannot write {out}/ ({exc.strerror or exc}); the {kept} finished run(s) committed "
                "so far are kept: fix the cause and continue with the same command and --resume"
            )
        else:
            error_line(
                f"cannot write {out}/ ({exc.strerror or exc}); no finished run could be kept: fix "
                "the cause and run the same command again"
            )
        return EXIT_FAILED
    warn_nonfinite(results.nonfinite_values(), held)
    return _report(results, out)


def _runs_kept(out: Path) -> int:
    """Runs done or failed committed in ``out`` (0 where it cannot be read)."""
    from gossipsim.results.status import status

    try:
        info = status(out)
    except (ConfigError, OSError):
        return 0
    return int(info["done"]) + int(info["failed"])


def _report(results: Any, out: Path, *, tables_written: bool = True) -> int:
    """Print what a run wrote (``tables_written``: whether the tables are in ``out``) and its
    summary; status 1 if runs failed. A failure while summarising is one line, never a
    traceback."""
    try:
        _print_summary(results, out, tables_written=tables_written)
    except BrokenPipeError:  # `gossipsim run ... | head`: main() stops quietly
        raise
    except Exception as exc:  # a bug here must not hide the written tables
        from gossipsim.execution.executors import describe_error

        where = f"the tables are in {out}/" if tables_written else "the runs are done"
        error_line(f"{where}, but summarising them failed ({describe_error(exc)})")
        return EXIT_FAILED
    failed = len(results.failures)
    if failed:
        which = f"all {failed} runs failed" if not len(results.runs) else f"{failed} run(s) failed"
        print(
            f"gossipsim: {which}; their errors and seeds are in {out}/failures.csv",
            file=sys.stderr,
        )
        return EXIT_FAILED
    return 0


def _print_summary(results: Any, out: Path, *, tables_written: bool = True) -> None:
    runs = results.runs
    size = f"{len(runs)} runs, {len(results.variants)} variant(s)"
    if tables_written:  # said once it is true: a failed write must not read as a success
        print(f"wrote {out}/ ({size})")
    else:
        print(f"the tables were NOT written to {out}/ ({size} finished and kept there)")
    engines = list(results.engines.values())
    print(
        "engine: "
        + "; ".join(f"{e} for {engines.count(e)} variant(s)" for e in sorted(set(engines)))
    )
    from gossipsim.results.summary import cover_summary, walks

    kinds = results.divergences  # what "converged" and the unlearning latency were judged on
    scenarios = {v.label: v.scenario for v in results.study.variants}
    for label, part in runs.groupby("variant", sort=False, observed=True):
        conv = part["convergence_iteration"].astype(float)
        cover = (
            _censored_text("cover iteration", cover_summary(part), "runs")
            if walks(scenarios[str(label)])
            else "no walk (centralised)"
        )
        line = f"  {label}: {cover}"
        line += f"; converged in {conv.notna().sum()}/{len(part)} runs"
        if conv.notna().any():
            line += f", mean convergence iteration {conv.mean():.2f}"
        print(line)
        note = (results.theory.get(str(label)) or {}).get("state_note")
        if note:  # a state-dependent schedule: no exact value is printed, and this says why
            print(f"    note: {note}")
        req = results.requests[results.requests["variant"] == label]
        name = kinds[str(label)].name if str(label) in kinds else "KL"
        for entry in results.request_entries(str(label)):
            print(_request_line(entry, req[req["request"] == entry["request"]], name))


def _censored_text(what: str, summary: dict[str, Any], unit: str) -> str:
    """ "mean X m over k/n runs" and, when some runs are censored, the Kaplan–Meier median and the
    restricted mean (a lower bound of the mean) beside it."""
    observed, total = summary["observed"], summary["total"]
    if observed == 0:
        return f"{what} not reached in any of {total} {unit}"
    text = f"mean {what} {summary['mean_of_observed']:.2f}"
    if observed == total:
        return f"{text} ({observed}/{total} {unit})"
    median = summary["km_median"]
    shown = f"{median:.0f}" if math.isfinite(median) else f"> {summary['restricted_to'] - 1:.0f}"
    return (
        f"{text} over the {observed}/{total} {unit} that reached it (biased low); Kaplan–Meier "
        f"median {shown}, mean >= {summary['restricted_mean']:.2f} counting the others at their end"
    )


def _request_line(entry: dict[str, Any], rows: Any, divergence: str = "KL") -> str:
    """One request's summary (never pooled with other nodes' requests): removal latency against the
    exact expectation of what the runs measure at this request's slot (or, where that is not
    computed, the value from a stationary holder, named so), the latency judged on the
    ``divergence`` (KL, or the KSD of particle protocols) against retraining (without a baseline,
    no retrain figure), each with its served count and a censoring-aware estimate when not every
    run served it."""
    at = entry["request_iteration"]
    when = f"slot {at:.0f}" if isinstance(at, float) else "its arrival"
    if entry["arrived"] < entry["runs"]:
        when += f" (arrived in {entry['arrived']}/{entry['runs']} runs)"
    line = f"    request for node {entry['node']} at {when}:"
    if entry["arrived"] == 0:
        return line + " never arrived"
    parts = []
    for column, name in (
        ("removal_latency", "removal latency"),
        ("latency", "unlearning latency"),
        ("retrain_latency", "retrain latency"),
    ):
        if column in entry:
            text = _censored_text(name, entry[column], "runs")
            if column == "removal_latency":
                text += _expected_text(entry)
            parts.append(text)
    line += " " + "; ".join(parts)
    settled = rows["settled_at_request"].dropna()
    unsettled = int((~settled.astype(bool)).sum())
    if unsettled:
        line += (
            f"\n      note: in {unsettled}/{len(rows)} runs the {divergence} was not within the "
            "tolerance before the request; their unlearning latency times learning or estimator "
            "noise"
        )
    both = rows.reindex(columns=["latency", "removal_latency"]).dropna()
    early = int((both["latency"] < both["removal_latency"]).sum())
    if early:
        line += (
            f"\n      note: in {early}/{len(rows)} runs the {divergence} to the posterior without "
            "the node was within the tolerance before the node's data left the state (unlearning "
            "latency < removal latency): at this tolerance it does not tell the posteriors with "
            "and without the node apart"
        )
    return line


def _expected_text(entry: dict[str, Any]) -> str:
    """What the simulated removal latency is compared with, named for what it is: the exact
    expectation at the request's slot and, when some runs ended before serving it, the exact
    counterpart of the restricted mean (runs see latencies up to τ − 1)."""
    exact = entry.get("expected_removal_latency") or {}
    if exact.get("no_unlearning"):
        return (
            " (the protocol has no unlearning of its own: the node's contribution stays; the "
            "retrain baseline serves the request)"
        )
    if exact.get("value") is not None:
        text = f"{exact['label']}: {exact['value']:.2f}"
        seen = entry.get("removal_latency") or {}
        if seen.get("observed", 0) < seen.get("total", 0) and exact.get("restricted_value"):
            tau = exact["restricted_to"]
            text += (
                f"; within the run E[min(L, {tau:,})] = {exact['restricted_value']:.2f}, served "
                f"with probability {exact['served_within_run']:.2f}"
            )
        return f" ({text})"
    if entry.get("next_visit_latency") is not None:
        return (
            f" (no exact expectation at this request; from a stationary holder with the node "
            f"visited: {entry['next_visit_latency']:.2f})"
        )
    return ""
