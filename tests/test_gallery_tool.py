"""tools/gallery.py: the numbers of a caption recomputed from a results folder, and a check that
fails when a caption states another number (issue 30, item 7)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

import gossipsim as gs

ROOT = Path(__file__).resolve().parent.parent


def _tool():
    spec = importlib.util.spec_from_file_location("gallery_tool", ROOT / "tools" / "gallery.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gallery_tool"] = module
    spec.loader.exec_module(module)
    return module


gallery = _tool()


def test_formats_as_the_captions_write():
    assert gallery.num(9.116) == "9.12"
    assert gallery.num(25.697) == "25.7"
    assert gallery.num(14311.2) == "14,311"
    assert gallery.num(0.0031, 2) == "0.0031"
    assert gallery.num(9.996) == "10.0"
    assert gallery.short(7.04) == "7"
    assert gallery.interval(8.586, 9.678) == "[8.6, 9.7]"
    assert gallery.interval(2274.2, 2524.9) == "[2,274, 2,525]"
    assert gallery.pm(44.87, 1.63) == "44.9 ± 1.6"
    assert gallery.pm(14311.2, 480.3) == "14,311 ± 480"
    assert gallery.pct(0.0271) == "2.7%"


def test_every_gallery_row_has_an_entry_and_every_entry_a_row():
    rows = gallery.captions((ROOT / "README.md").read_text(encoding="utf-8"))
    assert set(rows) == {f.image for f in gallery.FIGURES}
    assert len(rows) == 40
    for fig in gallery.FIGURES:  # its scenario is known and its image is in plots/
        assert fig.name in gallery.BY_NAME
        assert (ROOT / "plots" / fig.image).is_file()
        assert (ROOT / gallery.BY_NAME[fig.name].file).is_file()


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """A small run of the shipped unlearning_complete.toml (fewer runs) under its own name."""
    results = tmp_path_factory.mktemp("results")
    gs.run(
        ROOT / "scenarios" / "unlearning_complete.toml",
        runs=40,
        out=results / "unlearning_complete",
        plots=False,
    )
    return gallery.Folders(results)


def _readme(caption: str) -> str:
    return (
        "# x\n\n## Gallery\n\n| | |\n|---|---|\n"
        f"| ![a](plots/unlearning_complete_latency.png) | {caption} |\n\n## Next\n"
    )


def test_check_passes_on_the_recomputed_numbers_and_fails_on_an_edited_one(folders):
    fig = next(f for f in gallery.FIGURES if f.image == "unlearning_complete_latency.png")
    texts = fig.numbers(folders)
    res = folders("unlearning_complete")
    req = res.summary()["variants"]["unlearning_complete"]["per_request"][0]
    mean = req["removal_latency"]["restricted_mean"]
    # the recomputed text is the table's number, formatted (an independent computation of the mean)
    col = res.requests["removal_latency"].astype(float)
    assert abs(mean - col.mean()) < 1e-9
    assert any(f"mean {gallery.num(col.mean())} [" in t for t in texts)
    caption = "; ".join(texts) + "."
    assert gallery.mismatches(folders, _readme(caption), [fig]) == []
    edited = caption.replace(f"mean {gallery.num(mean)}", f"mean {gallery.num(mean + 0.5)}", 1)
    assert edited != caption
    lines = gallery.mismatches(folders, _readme(edited), [fig])
    assert len(lines) == 1
    assert lines[0].startswith("unlearning_complete_latency.png: expected 'over the") is False
    assert f"mean {gallery.num(mean)}" in lines[0] and "unlearning_complete_latency.png" in lines[0]


def test_check_names_a_missing_folder_and_an_unknown_row(tmp_path):
    readme = _readme("anything") + "| ![b](plots/new_figure.png) | a caption |\n"
    readme = readme.replace("## Next\n", "") + "\n## Next\n"
    fig = next(f for f in gallery.FIGURES if f.image == "unlearning_complete_latency.png")
    lines = gallery.mismatches(gallery.Folders(tmp_path), readme, [fig])
    assert any(line.startswith("new_figure.png: a gallery row") for line in lines)
    assert any("cannot recompute its numbers from 'unlearning_complete'" in line for line in lines)


def test_the_command_exits_1_on_a_mismatch_and_0_without(folders, tmp_path, capsys):
    fig = next(f for f in gallery.FIGURES if f.image == "unlearning_complete_latency.png")
    good = tmp_path / "good.md"
    good.write_text(_readme("; ".join(fig.numbers(folders))), encoding="utf-8")
    bad = tmp_path / "bad.md"
    bad.write_text(_readme("median 1 [1, 2]"), encoding="utf-8")
    original = gallery.FIGURES
    try:
        gallery.FIGURES = [fig]
        assert (
            gallery.main(["check", "--results", str(folders.results), "--readme", str(good)]) == 0
        )
        assert gallery.main(["check", "--results", str(folders.results), "--readme", str(bad)]) == 1
    finally:
        gallery.FIGURES = original
    out = capsys.readouterr().out
    assert "0 mismatch(es) in 1 captions" in out
    assert "unlearning_complete_latency.png: expected" in out
