"""A results folder that nothing can wedge, damage silently or lose (issue 21, items 1-5 and 16):
one command at a time (an OS file lock), nothing removed before everything is known writable,
checksummed parts, tables checked against what was written, resume refused across a change of
code, and an honest message when a full disk kept nothing."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

import gossipsim as gs
from gossipsim.cli.parser import main
from gossipsim.errors import ConfigError
from gossipsim.results import store, studyrecord
from tests.folders import forged, interrupted, parts_of, same_tables, split, sweep_raw
from tests.helpers import to_toml


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def _status(folder: Path, capsys, code: int = 0) -> dict:
    capsys.readouterr()
    assert main(["status", str(folder), "--json"]) == code
    return json.loads(capsys.readouterr().out)


def _file(tmp_path: Path, raw: dict | None = None, name: str = "s.toml") -> Path:
    path = tmp_path / name
    path.write_text(to_toml(raw or sweep_raw()))
    return path


# ------------------------------------------------------------------ item 1: one command at a time

HOLD = """
import sys, time
from gossipsim.results.folderlock import FolderLock
FolderLock(sys.argv[1], "--out").acquire()
print("held", flush=True)
time.sleep(120)
"""


def _holder(folder: Path) -> subprocess.Popen:
    """Another process holding ``folder`` as a command does (started, lock taken)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(folder)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_a_command_on_a_folder_in_use_is_refused_in_one_line_naming_the_holder(
    tmp_path, capsys, monkeypatch
):
    """While another command holds the folder, run, --resume, gs.run(out=) and Results.write are
    refused in one line naming its process (nothing changed); status says it is running; once
    the holder dies (kill -9: the OS releases the lock) --resume completes the sweep."""
    from gossipsim.results import folderlock

    monkeypatch.setattr(folderlock, "RETRY_SECONDS", 0.05)  # each refusal at once
    path = _file(tmp_path)
    whole = gs.run(path)
    out = tmp_path / "R"
    study = gs.load_scenario(path)
    interrupted(study, out, [(0, [0, 1, 2]), (1, [0, 1])])
    proc = _holder(out)
    before = _snapshot(out)
    try:
        for extra in ([], ["--resume"]):
            capsys.readouterr()
            assert main(["run", str(path), "--out", str(out), "--no-plots", *extra]) == 2
            line = _one_line(capsys.readouterr().err)
            assert f"in use by another gossipsim command (process {proc.pid})" in line, line
        with pytest.raises(ConfigError, match=f"process {proc.pid}"):
            gs.run(study, out=out, resume=True, plots=False)
        with pytest.raises(ConfigError, match=f"^out_dir: .*process {proc.pid}"):
            whole.write(out)
        info = _status(out, capsys)
        assert info["running"] == proc.pid and (info["done"], info["remaining"]) == (5, 7)
        assert main(["status", str(out)]) == 0
        assert f"(running: process {proc.pid})" in capsys.readouterr().out
        assert _snapshot(out) == before  # every refusal left the folder as it was
    finally:
        proc.kill()
        proc.wait()
    assert _status(out, capsys)["running"] is None
    assert main(["run", str(path), "--out", str(out), "--no-plots", "--resume"]) == 0
    same_tables(whole, gs.load_results(out))
    assert not (out / ".gossipsim" / "lock").exists()  # released and removed


def test_resume_repairs_a_folder_with_duplicate_parts(tmp_path, capsys):
    """Two commands that wrote one folder at once (before folders were locked) left parts holding
    the same runs: status counts each run once, and --resume merges each once (it used to fail
    with pandas' InvalidIndexError at every attempt, status counting more runs than there are)."""
    path = _file(tmp_path)
    whole = gs.run(path)
    out = tmp_path / "R"
    study = gs.load_scenario(path)
    interrupted(study, out, [(0, [0, 1, 2, 3]), (1, [0, 1, 2])])
    interrupted(study, out, [(0, [2, 3, 4]), (1, [1, 2]), (1, [3])])  # the second command
    info = _status(out, capsys)
    assert info["done"] + info["remaining"] == 12 and info["remaining"] >= 0
    assert (info["done"], info["duplicate_parts"]) == (8, 2)  # v0: 0-3; v1: 0-2, 3
    assert main(["status", str(out)]) == 0
    assert "2 part(s) hold runs of other parts" in capsys.readouterr().out
    assert main(["run", str(path), "--out", str(out), "--no-plots", "--resume"]) == 0
    assert "merged once" in _one_line(capsys.readouterr().err)
    same_tables(whole, gs.load_results(out))
    assert _status(out, capsys)["done"] == 12


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")
def test_pool_workers_do_not_hold_the_folder_after_their_parent_dies(tmp_path):
    """A forked pool worker closes its copy of the lock: once the command is killed (kill -9),
    the folder is free at once, not when its workers notice and exit."""
    from gossipsim.results.folderlock import holder

    raw = sweep_raw(runs=400, iterations=4000)
    path = _file(tmp_path, raw)
    out = tmp_path / "R"
    args = ["run", str(path), "--out", str(out), "--workers", "2", "--no-plots", "--engine"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "gossipsim", *args, "event", "--progress", "off"],
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    children: list[int] = []
    while time.monotonic() < deadline and len(children) < 2:  # until the pool has started
        assert proc.poll() is None
        time.sleep(0.02)
        tasks = Path(f"/proc/{proc.pid}/task").iterdir()
        children = [int(x) for task in tasks for x in (task / "children").read_text().split()]
    time.sleep(0.2)  # the workers have forked and run the fork handlers
    assert holder(out) == proc.pid and len(children) == 2
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    try:
        assert holder(out) is None
    finally:
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_a_refused_command_leaves_no_folder_behind(tmp_path, capsys):
    """The lock makes the folder before the checks; a command refused before it runs removes what
    it made (here a mistyped cluster, refused once the folder is locked)."""
    path = _file(tmp_path)
    out = tmp_path / "new" / "R"
    assert main(["run", str(path), "--out", str(out), "--cluster", "lcoal:2"]) == 2
    assert "--cluster" in _one_line(capsys.readouterr().err)
    assert not (tmp_path / "new").exists()


# --------------------------------------------------------- item 2: a refused rerun removes nothing


def _read_only(folder: Path) -> bool:
    """Make ``folder`` impossible to write in (chattr +i as root, else chmod); False if it stays
    writable (a file system without these)."""
    if os.geteuid() == 0:
        if subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode:
            return False
    else:
        folder.chmod(0o500)
    try:
        (folder / "probe").write_text("x")
    except OSError:
        return True
    (folder / "probe").unlink()
    _writable(folder)
    return False


def _writable(folder: Path) -> None:
    if os.geteuid() == 0:
        subprocess.run(["chattr", "-i", str(folder)], capture_output=True)
    else:
        folder.chmod(0o700)


@pytest.mark.parametrize("locked", [".gossipsim", "runs.csv", "plots"])
def test_a_refused_rerun_removes_nothing(tmp_path, capsys, locked):
    """The bookkeeping directory, a table file or plots/ cannot be written: the rerun is refused
    in one line and the folder is byte for byte as it was (the tables and summary.json used to be
    deleted first, while status went on reporting the runs done)."""
    path = _file(tmp_path, sweep_raw(runs=2))
    out = tmp_path / "R"
    assert main(["run", str(path), "--out", str(out), "--no-plots"]) == 0
    (out / "plots").mkdir()
    (out / "plots" / "kl.png").write_bytes(b"png")
    before = _snapshot(out)
    target = out / locked
    if locked == "runs.csv" and os.geteuid() != 0:
        pytest.skip("a file cannot be made undeletable without root (its folder can)")
    if not _read_only(target):
        pytest.skip("this file system cannot make a folder read-only")
    try:
        capsys.readouterr()
        assert main(["run", str(path), "--out", str(out), "--no-plots"]) == 2
        err = capsys.readouterr().err
    finally:
        _writable(target)
    assert _snapshot(out) == before
    line = _one_line(err)
    assert "--out" in line and "nothing was changed" in line, line
    info = _status(out, capsys)
    assert info["complete"] and info["done"] == 4 and info["damaged"] == []


# -------------------------------------------------------------------- item 3: checksummed parts


def _whole_and_cut(tmp_path: Path) -> tuple[Path, gs.Results, Path]:
    path = _file(tmp_path)
    whole = gs.run(path)
    out = tmp_path / "R"
    interrupted(gs.load_scenario(path), out, [(0, [0, 1, 2]), (0, [3, 4]), (1, [0, 1, 2, 3])])
    return path, whole, out


def test_a_damaged_part_is_reported_and_its_runs_run_again(tmp_path, capsys):
    """One byte of a part's arrays flipped: status reports the part (not counted) and --resume
    says which part it sets aside and why, runs its runs again and writes the uninterrupted
    tables (it used to merge the part: tables differing from the uninterrupted run, exit 0)."""
    path, whole, out = _whole_and_cut(tmp_path)
    part = parts_of(out)[1]  # runs 3 and 4 of the ring
    data = bytearray(part.read_bytes())
    data[-5] ^= 0x40  # the last array's bytes
    part.write_bytes(bytes(data))
    info = _status(out, capsys)
    assert info["done"] == 7 and info["damaged"] == [
        f"{part.name}: its checksum does not match its bytes (damaged or truncated)"
    ]
    assert main(["status", str(out)]) == 0
    assert f"not counted, damaged: {part.name}" in capsys.readouterr().out
    assert main(["run", str(path), "--out", str(out), "--no-plots", "--resume"]) == 0
    line = _one_line(capsys.readouterr().err)
    assert part.name in line and "checksum" in line and "run again" in line
    same_tables(whole, gs.load_results(out))


def _forge(part: Path, change) -> None:
    header, arrays = split(part.read_bytes())
    length = change(header)
    part.write_bytes(forged(header, arrays, length=length))


def _array(header: dict, name: str) -> list:
    return next(entry for entry in header["arrays"] if entry[0] == name)


def _set(entry: list, index: int, value) -> None:
    entry[index] = value


FORGERIES = {
    "header length 2^62": lambda h: 2**62,
    "header length 2^64 - 1": lambda h: 2**64 - 1,
    "a metric column longer than its rows": lambda h: _set(_array(h, "metrics.kl"), 2, [10**6]),
    "a metric column shorter than its rows": lambda h: _set(_array(h, "metrics.kl"), 2, [1]),
    "a shape of -1": lambda h: _set(_array(h, "metrics.kl"), 2, [-1]),
    "a huge shape": lambda h: _set(_array(h, "metrics.kl"), 2, [2**62, 2**62]),
    "another dtype": lambda h: _set(_array(h, "visits"), 1, "<f8"),
    "an object dtype": lambda h: _set(_array(h, "metrics.kl"), 1, "|O"),
    "a dtype that is no dtype": lambda h: _set(_array(h, "metrics.kl"), 1, "banana"),
    "a negative offset": lambda h: _set(_array(h, "metrics.kl"), 3, -8),
    "an offset into the header": lambda h: _set(_array(h, "metrics.kl"), 3, -16),
    "a null seed": lambda h: h["fields"]["run_rows"][0].update(seed=None),
    "a text seed": lambda h: h["fields"]["run_rows"][0].update(seed="7"),
    "empty fields": lambda h: h.update(fields={}),
    "runs listed twice": lambda h: h.update(runs=[h["runs"][0]] * 2),
    "a run of another part": lambda h: h.update(runs=[0, 1]),
    "a run beyond the sweep": lambda h: h.update(runs=[3, 400]),
    "no runs": lambda h: h.pop("runs") and None,
    "an unknown kind": lambda h: h.update(kind="pickle"),
    "another variant": lambda h: h.update(variant=1),
}


def test_a_malformed_part_is_one_line_and_reported(tmp_path):
    """A part whose header is malformed though its checksum matches (written so on purpose, or by
    a bug), each of the kinds above: decoding it is a ValueError of one line (never a
    MemoryError, an OverflowError or a half-read part) and status reports it, not counting its
    runs."""
    import shutil

    from gossipsim.results.status import status

    _, _, template = _whole_and_cut(tmp_path)
    for i, (forgery, change) in enumerate(sorted(FORGERIES.items())):
        out = tmp_path / f"f{i}"
        shutil.copytree(template, out)
        part = parts_of(out)[1]
        _forge(part, change)
        if forgery != "another variant":  # a part alone does not say its name's variant
            with pytest.raises(ValueError) as caught:
                store.decode_part(bytearray(part.read_bytes()))
            assert "\n" not in str(caught.value), forgery
        info = status(out)
        assert info["done"] == 7, forgery
        assert [d.split(":")[0] for d in info["damaged"]] == [part.name], (forgery, info)


@pytest.mark.parametrize("forgery", ["header length 2^62", "another dtype", "a null seed"])
def test_resume_runs_the_runs_of_a_malformed_part_again(tmp_path, capsys, forgery):
    """--resume says which part it sets aside and runs its runs again: the uninterrupted tables
    (the old code: a MemoryError traceback, tables silently different, exit 0)."""
    path, whole, out = _whole_and_cut(tmp_path)
    part = parts_of(out)[1]
    _forge(part, FORGERIES[forgery])
    assert main(["run", str(path), "--out", str(out), "--no-plots", "--resume"]) == 0
    assert part.name in _one_line(capsys.readouterr().err)
    same_tables(whole, gs.load_results(out))


def test_parts_of_an_older_gossipsim_are_run_again(tmp_path, capsys):
    """A part without a checksum (GOSSIPSIM-PART-1) cannot be verified: its runs are run again."""
    path, whole, out = _whole_and_cut(tmp_path)
    part = parts_of(out)[0]
    header, arrays = split(part.read_bytes())
    text = json.dumps(header).encode()
    part.write_bytes(b"GOSSIPSIM-PART-1\n" + len(text).to_bytes(8, "little") + text + arrays)
    assert _status(out, capsys)["damaged"] == [
        f"{part.name}: written by an older gossipsim, without a checksum"
    ]
    assert main(["run", str(path), "--out", str(out), "--no-plots", "--resume"]) == 0
    same_tables(whole, gs.load_results(out))


# ----------------------------------------------------- item 4: tables checked against the record


def _finished(tmp_path: Path, tables: str = "auto") -> tuple[Path, gs.Results, Path]:
    path = _file(tmp_path)
    out = tmp_path / "R"
    assert main(["run", str(path), "--out", str(out), "--no-plots", "--tables", tables]) == 0
    return path, gs.load_results(out), out


def _refused_everywhere(out: Path, tmp_path: Path, capsys, name: str) -> None:
    """load_results, plot and compare refuse the folder in one line naming ``name``; status says
    it is damaged (exit 1)."""
    with pytest.raises(ConfigError, match=f"^DIR: .*{name}") as caught:
        gs.load_results(out)
    assert "\n" not in str(caught.value)
    capsys.readouterr()
    assert main(["plot", str(out)]) == 2
    assert name in _one_line(capsys.readouterr().err)
    assert main(["compare", str(out), "--out", str(tmp_path / "c.png")]) == 2
    assert name in _one_line(capsys.readouterr().err)
    assert not (tmp_path / "c.png").exists() and not (out / "plots").exists()
    info = _status(out, capsys, code=1)
    assert info["complete"] and any(d.startswith(name) for d in info["damaged"]), info
    assert main(["status", str(out)]) == 1
    assert "damaged: " + name in capsys.readouterr().out


def test_a_table_truncated_mid_row_is_refused(tmp_path, capsys):
    """metrics.csv cut mid-row with the Parquet copies gone: refused (it used to load 199 of 480
    rows, the last all NaN and `run` turned float, and `gossipsim plot` exited 0)."""
    _, _, out = _finished(tmp_path)
    for copy in out.glob("*.parquet"):
        copy.unlink()
    text = (out / "metrics.csv").read_bytes()
    (out / "metrics.csv").write_bytes(text[: len(text) // 2 + 7])
    _refused_everywhere(out, tmp_path, capsys, "metrics.csv")


def test_a_text_cell_in_a_column_of_numbers_is_refused(tmp_path, capsys):
    """A cell of runs.csv edited to text: refused naming the file, by its checksum; and in a folder
    whose summary.json records no checksums (an older gossipsim), by the column's type."""
    _, _, out = _finished(tmp_path, tables="csv")
    table = pd.read_csv(out / "runs.csv")
    table["time"] = table["time"].astype(object)
    table.loc[2, "time"] = "abc"
    table.to_csv(out / "runs.csv", index=False)
    _refused_everywhere(out, tmp_path, capsys, "runs.csv")
    summary = json.loads((out / "summary.json").read_text())
    for key in ("files", "summary_sha256"):  # as an older gossipsim wrote it
        summary.pop(key, None)
    (out / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(ConfigError, match=r"^DIR: .*runs.csv.*column 'time'"):
        gs.load_results(out)


@pytest.mark.parametrize("sealed", [True, False], ids=["checksummed", "older"])
def test_column_types_that_are_not_a_table_are_one_line(tmp_path, capsys, sealed):
    """`"columns": {"runs": "x"}` in summary.json: one line naming summary.json (it used to be an
    AttributeError traceback), whether the summary has a checksum or not."""
    _, _, out = _finished(tmp_path)
    summary = json.loads((out / "summary.json").read_text())
    summary["columns"] = {"runs": "x"}
    if not sealed:
        for key in ("files", "summary_sha256"):
            summary.pop(key, None)
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    with pytest.raises(ConfigError, match=r"^DIR: .*summary.json") as caught:
        gs.load_results(out)
    assert "\n" not in str(caught.value)
    assert main(["plot", str(out)]) == 2
    assert "summary.json" in _one_line(capsys.readouterr().err)
    if sealed:
        assert _status(out, capsys, code=1)["damaged"] == [
            "summary.json: does not match its checksum"
        ]


def test_summary_records_every_table_file(tmp_path):
    """summary.json records each table file's rows, size and SHA-256 (computed here from the
    files), and its own checksum; Parquet copies may be deleted, the CSV files then read."""
    import hashlib

    _, res, out = _finished(tmp_path)
    summary = json.loads((out / "summary.json").read_text())
    for name, entry in summary["files"].items():
        data = (out / name).read_bytes()
        assert entry["bytes"] == len(data)
        assert entry["sha256"] == hashlib.sha256(data).hexdigest()
        assert entry["rows"] == len(getattr(res, name.split(".")[0]))
    for copy in out.glob("*.parquet"):
        copy.unlink()
    same_tables(res, gs.load_results(out))


# ------------------------------------------------------------- item 5: resume across a code change

PLUGIN = '''
from gossipsim.protocols.gfvl_kind import GFVL


class Tagged(GFVL):
    """GFVL under another name ({tag})."""
'''


def test_resume_refuses_a_plug_in_edited_since_the_runs(tmp_path, capsys, monkeypatch):
    """A plug-in protocol (import path) edited between an interrupt and --resume: refused, naming
    the plug-in and its file (191 of 900 runs used to come from the edited code, exit 0);
    --allow-code-change resumes, says so, and the record keeps what changed."""
    module = tmp_path / "plug21.py"
    module.write_text(PLUGIN.format(tag="first"))
    monkeypatch.syspath_prepend(str(tmp_path))
    raw = sweep_raw()
    raw["protocol"] = {"kind": "plug21:Tagged"}
    path = _file(tmp_path, raw)
    out = tmp_path / "R"
    interrupted(gs.load_scenario(path), out, [(0, [0, 1])])
    module.write_text(PLUGIN.format(tag="second"))
    args = ["run", str(path), "--out", str(out), "--no-plots", "--resume"]
    before = _snapshot(out)
    capsys.readouterr()
    assert main(args) == 2
    line = _one_line(capsys.readouterr().err)
    assert "plug21:Tagged" in line and str(module) in line and "--allow-code-change" in line
    assert _snapshot(out) == before
    record = json.loads((out / ".gossipsim" / "study.json").read_text())
    assert record["code"]["plugins"]["protocol.kind=plug21:Tagged"]["file"] == str(module)
    with pytest.raises(ConfigError, match="^--resume: the code has changed"):
        gs.run(gs.load_scenario(path), out=out, resume=True, plots=False)
    assert main([*args, "--allow-code-change"]) == 0
    assert "resuming across a change of code" in _one_line(capsys.readouterr().err)
    record = json.loads((out / ".gossipsim" / "study.json").read_text())
    assert "plug21:Tagged" in record["allowed_code_changes"][0]


CHANNEL_PLUGIN = '''
from gossipsim.network.channels import Channel


class Slow(Channel):
    """Every hop takes {seconds} s."""

    def delay(self, sender, receiver, bits):
        return {seconds}
'''


def test_resume_refuses_a_channel_plug_in_edited_since_the_runs(tmp_path, capsys, monkeypatch):
    """A channel of one's own (``[links] kind``) is fingerprinted like the other plug-ins: edited
    between an interrupt and --resume (its hops now slower), refused, naming it and its file."""
    module = tmp_path / "chan33.py"
    module.write_text(CHANNEL_PLUGIN.format(seconds=0.5))
    monkeypatch.syspath_prepend(str(tmp_path))
    raw = sweep_raw()
    raw["links"] = {"kind": "chan33:Slow"}
    path = _file(tmp_path, raw)
    out = tmp_path / "R"
    interrupted(gs.load_scenario(path), out, [(0, [0, 1])])
    record = json.loads((out / ".gossipsim" / "study.json").read_text())
    assert record["code"]["plugins"]["links.kind=chan33:Slow"]["file"] == str(module)
    module.write_text(CHANNEL_PLUGIN.format(seconds=2.0))
    capsys.readouterr()
    assert main(["run", str(path), "--out", str(out), "--no-plots", "--resume"]) == 2
    line = _one_line(capsys.readouterr().err)
    assert "chan33:Slow" in line and str(module) in line and "--allow-code-change" in line


def test_resume_refuses_another_gossipsim_source_or_version(tmp_path, capsys, monkeypatch):
    """gossipsim's own source is fingerprinted file by file (a development install keeps its
    version while it is edited): an edited file, or another version, is named in the refusal."""
    from gossipsim.results import provenance

    path = _file(tmp_path)
    out = tmp_path / "R"
    interrupted(gs.load_scenario(path), out, [(0, [0, 1])])
    edited = dict(provenance.source_hashes())
    edited["gossipsim/measurement/measure.py"] = "0" * 16
    monkeypatch.setattr(provenance, "source_hashes", lambda: edited)
    args = ["run", str(path), "--out", str(out), "--no-plots", "--resume"]
    capsys.readouterr()
    assert main(args) == 2
    assert "gossipsim's source (gossipsim/measurement/measure.py)" in _one_line(
        capsys.readouterr().err
    )
    monkeypatch.undo()
    monkeypatch.setattr(provenance, "__version__", "99.0")
    assert main(args) == 2
    assert "gossipsim 0.1.0 -> 99.0" in _one_line(capsys.readouterr().err)
    with pytest.raises(ConfigError, match="^--allow-code-change: applies only with --resume"):
        gs.run(gs.load_scenario(path), out=tmp_path / "other", allow_code_change=True, plots=False)
    monkeypatch.undo()
    assert main(args) == 0  # the same code again: resumed


# --------------------------------------------------------------- item 16: what a full disk kept


@pytest.mark.parametrize("fits", [1, 3], ids=["nothing-kept", "two-parts-kept"])
def test_a_full_disk_says_what_it_kept(tmp_path, monkeypatch, capsys, fits):
    """The disk fills up after ``fits`` writes (study.json, then parts): with no part written the
    line must not say the finished runs are kept (it did, with 0 parts on disk)."""
    path = _file(tmp_path, sweep_raw(runs=3))
    out = tmp_path / "R"
    real = store.atomic_write_bytes
    calls = []

    def fills_up(target, data):
        calls.append(target)
        if len(calls) > fits:
            raise OSError(errno.ENOSPC, "No space left on device", str(target))
        real(target, data)

    monkeypatch.setattr(store, "atomic_write_bytes", fills_up)  # the parts
    monkeypatch.setattr(studyrecord, "atomic_write_bytes", fills_up)  # study.json
    monkeypatch.setattr(store, "COMMIT_RUNS", 1)
    assert main(["run", str(path), "--out", str(out), "--no-plots", "--engine", "event"]) == 1
    line = _one_line(capsys.readouterr().err)
    monkeypatch.undo()
    done = _status(out, capsys)["done"]
    assert done == fits - 1
    if done:
        assert (
            f"the {done} finished run(s) committed so far are kept" in line and "--resume" in line
        )
    else:
        assert "no finished run could be kept" in line and "are kept" not in line, line
