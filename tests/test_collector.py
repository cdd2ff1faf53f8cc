"""The collector pause around builds (constrain/core/collector.py): no collection runs while a
guide is compiled or a first-visit mask is built, and the collector comes back as it was."""

from __future__ import annotations

import gc
import threading
from typing import Any, Callable, Iterator, TypeVar

import pytest

import constrain
from constrain.core import collector

R = TypeVar("R")

# An object of 40 members, each a string with a length and a pattern: tens of thousands of
# containers built by the compile and by the first masks.
WIDE = {
    "type": "object",
    "properties": {f"field_{k}": {"type": "string", "maxLength": 30 + k, "pattern": f"^[a-z]*{k}"} for k in range(40)},
    "required": ["field_0"],
}


@pytest.fixture(scope="module")
def smollm2_vocabulary(smollm2: object) -> constrain.Vocabulary:
    return constrain.Vocabulary.from_tokenizer(smollm2)


class Builds:
    """Counts the collections that start while ``during`` runs a call (each call begins on a
    freshly collected heap, so none is owed from before)."""

    def __init__(self) -> None:
        self.building = False
        self.collections = 0

    def note(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start" and self.building:
            self.collections += 1

    def during(self, call: Callable[[], R]) -> R:
        gc.collect()
        self.building = True
        try:
            return call()
        finally:
            self.building = False


@pytest.fixture
def builds() -> Iterator[Builds]:
    watch = Builds()
    gc.callbacks.append(watch.note)
    try:
        yield watch
    finally:
        gc.callbacks.remove(watch.note)


def test_no_collection_runs_while_a_guide_is_compiled_and_its_first_mask_built(
    smollm2_vocabulary: constrain.Vocabulary, builds: Builds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same compile and first mask with the pause switched off run collections (so the
    counts can fail); with it the compile runs none, and the first mask at most the one that
    the allocations of its build owe once the collector resumes (at the mask cache's entry)."""
    assert gc.isenabled()
    mask = constrain.allocate_bitmask(smollm2_vocabulary.size)
    counts = {}
    for enabled in (False, True):
        monkeypatch.setattr(collector, "ENABLED", enabled)
        compiler = constrain.Compiler(smollm2_vocabulary)
        builds.collections = 0
        guide = builds.during(lambda: compiler.json_schema(WIDE, strict_properties=False))
        compiled = builds.collections
        builds.collections = 0
        builds.during(lambda: guide.fill_bitmask(guide.initial_state, mask))
        counts[enabled] = (compiled, builds.collections)
        assert gc.isenabled()
    assert counts[False][0] > 10 and counts[False][1] > 3, counts
    assert counts[True][0] == 0 and counts[True][1] <= 1, counts


def test_the_pause_nests_and_leaves_a_disabled_collector_disabled() -> None:
    assert gc.isenabled()
    with collector.paused():
        assert not gc.isenabled()
        with collector.paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with collector.paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # it was off before: the pause does not turn it on
    finally:
        gc.enable()


def test_an_error_inside_a_build_resumes_the_collector(smollm2_vocabulary: constrain.Vocabulary) -> None:
    with pytest.raises(constrain.ConstrainError):
        constrain.Compiler(smollm2_vocabulary).json_schema({"type": "string", "minLength": 3, "maxLength": 1})
    assert gc.isenabled()


def test_overlapping_pauses_in_threads_resume_when_the_last_one_ends() -> None:
    """The collector is one per process: a thread that finishes first leaves it paused for
    the one still building, and the last to finish resumes it."""
    inside, release = threading.Event(), threading.Event()

    def long_build() -> None:
        with collector.paused():
            inside.set()
            release.wait(10)

    worker = threading.Thread(target=long_build)
    worker.start()
    inside.wait(10)
    with collector.paused():
        assert not gc.isenabled()
    assert not gc.isenabled()  # the worker's build still runs
    release.set()
    worker.join(10)
    assert gc.isenabled()
