"""The commands on results folders: ``gossipsim plot`` (re)draws a folder's figures, ``gossipsim
status`` counts its runs done, failed and remaining, ``gossipsim compare`` overlays the KL (or KSD)
curves of several folders in one figure."""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gossipsim.cli.exits import EXIT_FAILED, error_line, warn_nonfinite
from gossipsim.core.textfiles import checked_path
from gossipsim.errors import ConfigError


def plot_command(args: argparse.Namespace) -> int:
    from gossipsim.results.manifest import start_check

    folder = Path(args.dir)
    # every table file the folder records is hashed on a thread from now on, while the modules
    # below are imported (about a second): on two cores, verifying costs the command little time
    check = start_check(folder)
    with _collector_paused(getattr(args, "own_process", False)):
        from gossipsim.figures.costaxis import figure_name
        from gossipsim.figures.standard import (  # matplotlib: imported with the collector paused
            FIGURES,
            plot_results,
            x_refusal,
        )
        from gossipsim.figures.time_map import time_map_refusal as not_drawn_reason
        from gossipsim.results.figuretables import load_figure_tables
        from gossipsim.results.folderfiles import check_output_folder

        if args.figure:
            unknown = [name for name in args.figure if name not in FIGURES]
            if unknown:
                raise ConfigError(
                    "--figure", f"unknown figure {unknown[0]!r}; allowed: {', '.join(FIGURES)}"
                )
        x = getattr(args, "x", "iteration")
        why = x_refusal(x, args.figure)
        if why is not None:
            raise ConfigError("--x", why)
        # a folder this gossipsim wrote: its tables and summary.json, without its study
        drawn = load_figure_tables(folder, check, x=x, which=args.figure)
        results = None
        if drawn is None:  # another version's folder, or one without its graphs: the study too
            from gossipsim.results.results import load_results

            results = load_results(folder)
    check_output_folder(folder / "plots", "DIR")
    if results is not None and not results.graphs:  # an older folder, without graphs/: build them
        try:
            results.graphs = _graphs(results.study)
        except (ConfigError, OSError) as exc:
            print(f"gossipsim: note: graph drawing skipped ({exc})", file=sys.stderr)
    from gossipsim.core.libwarnings import HELD
    from gossipsim.results.nonfinite import nonfinite_lines

    try:
        with HELD.holding() as held:
            if drawn is not None:
                paths = plot_results(
                    drawn.metrics, drawn.runs, drawn.requests, drawn.visits, drawn.summary,
                    folder / "plots", fmt=args.format, statistic=args.statistic,
                    graphs=drawn.graphs, which=args.figure, particles=drawn.particles, x=x,
                )  # fmt: skip
                written: dict[str, Any] = {p.stem: p for p in paths}
            else:
                assert results is not None
                written = results.plot(
                    folder / "plots", which=args.figure, fmt=args.format, statistic=args.statistic,
                    x=x,
                )  # fmt: skip
    except Exception as exc:  # one line, never a traceback; the tables stay
        from gossipsim.execution.executors import describe_error

        error_line(f"plotting {folder}/ failed ({describe_error(exc)})")
        return EXIT_FAILED
    if drawn is not None:  # the swept keys' columns are not read
        tables = {"metrics": drawn.metrics, "runs": drawn.runs, "requests": drawn.requests,
                  "particles": drawn.particles}  # fmt: skip
        warn_nonfinite(nonfinite_lines(tables), held)
    else:
        assert results is not None
        warn_nonfinite(results.nonfinite_values(), held)
    for path in written.values():
        print(path)
    for name in args.figure or ():  # asked for and not drawn: say why
        if figure_name(name, x) in written:
            continue
        why = f"it does not apply to {folder}"
        if name == "time_map":
            if drawn is not None:
                reason = not_drawn_reason(drawn.metrics, drawn.summary, drawn.graphs)
            else:
                assert results is not None
                reason = not_drawn_reason(results.metrics, results.figure_summary(), results.graphs)
            why = reason or why
        print(f"gossipsim: note: figure {name} not drawn: {why}", file=sys.stderr)
    if x != "iteration" and not written:
        what = "sends any bits" if x == "bits" else "takes any simulated time"
        print(
            f"gossipsim: note: no figure drawn against {x}: no slot of {folder} {what}, or no "
            "figure with a slot axis applies",
            file=sys.stderr,
        )
    if getattr(args, "own_process", False):
        gc.freeze()  # the process ends: a collection at exit would examine every object for nothing
    return 0


@contextlib.contextmanager
def _collector_paused(own_process: bool) -> Iterator[None]:
    """In a process that ends with the command (``own_process``), no garbage collection while the
    block imports modules and reads tables, which live to the end, and everything made so far
    frozen out of the collector's reach after it: collections examined them again and again
    (about 0.1-0.2 s of ``gossipsim plot`` on Fig. 3's folder). Elsewhere (``main(argv)`` called
    from Python) the collector is left alone."""
    if not own_process or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()


def _graphs(study: Any) -> dict[str, Any]:
    from gossipsim.execution.runner import build_world

    graphs = {}
    for variant in study.variants:
        if variant.scenario.topology.nodes is not None and variant.scenario.topology.nodes > 500:
            continue
        graphs[variant.label] = build_world(variant.scenario).graph
    return graphs


def status_command(args: argparse.Namespace) -> int:
    from gossipsim.results.status import status

    info = status(args.dir)
    damaged_tables = bool(info["complete"] and info["damaged"])
    if args.json:
        print(json.dumps(info))
    else:
        if info["running"] is not None:
            state = f"running: process {info['running']}" if info["running"] else "running"
        else:
            state = "complete" if info["complete"] else "interrupted"
        line = (
            f"{args.dir}: {info['name']} ({state}): {info['done']} done, {info['failed']} failed, "
            f"{info['remaining']} remaining of {info['runs']} runs"
        )
        damaged = info["damaged"]
        shown = "; ".join(damaged[:3]) + (
            f"; and {len(damaged) - 3} more" if len(damaged) > 3 else ""
        )
        if damaged_tables and info.get("repairable"):
            line += (
                f"; damaged: {shown}; --resume rewrites them from their intact copies (or run "
                "the scenario again)"
            )
        elif damaged_tables:
            line += f"; damaged: {shown}; run the scenario again"
        elif damaged:
            line += f"; not counted, damaged: {shown} (--resume runs their runs again)"
        if info["duplicate_parts"]:
            line += (
                f"; {info['duplicate_parts']} part(s) hold runs of other parts (two commands "
                "wrote the folder at once): each run counted once, merged once by --resume"
            )
        print(line)
    return EXIT_FAILED if damaged_tables else 0


def compare_command(args: argparse.Namespace) -> int:
    from gossipsim.figures.compare import plot_comparison
    from gossipsim.figures.standard import FORMATS
    from gossipsim.results.folderfiles import check_output_folder
    from gossipsim.results.results import load_results

    out = Path(args.out)
    if not args.out.strip() or out.suffix.lstrip(".").lower() not in FORMATS:
        raise ConfigError(
            "--out",
            f"a figure file ending in {', '.join('.' + f for f in FORMATS)} (got {args.out!r})",
        )
    checked_path(args.out, "--out")  # a name the file system can take
    if out.is_dir():
        raise ConfigError("--out", f"{args.out!r} is a folder; give a figure file")
    check_output_folder(out.parent, "--out")
    studies = []
    for folder in args.dirs:
        res = load_results(folder)
        studies.append((Path(folder).name, res.metrics, res.requests, res.summary()))
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        plot_comparison(studies, out, statistic=args.statistic, x=getattr(args, "x", "iteration"))
    except ConfigError:  # a choice of the command's (--x): exit 2
        raise
    except Exception as exc:  # one line, never a traceback
        from gossipsim.execution.executors import describe_error

        error_line(f"drawing {args.out} failed ({describe_error(exc)})")
        return EXIT_FAILED
    print(out)
    return 0
