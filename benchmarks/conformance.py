#!/usr/bin/env python
"""JSON Schema conformance: constrain's schema guides against the official test suite (draft 2020-12).

Run with ``python benchmarks/conformance.py [--suite PATH] [--tokenizer NAME] [--only TEXT] [--no-write]``.
It prints a summary table, writes ``benchmarks/results/conformance.json`` (every case)
and regenerates ``docs/json_schema_conformance.md``.

The suite is not part of this repository; by default it is looked for in
``../shared/data/json-schema-test-suite`` next to the repository root. Point
``--suite`` at a checkout of https://github.com/json-schema-org/JSON-Schema-Test-Suite
(the folder that holds ``tests/``) to run it elsewhere.

Method
------
Each group's schema is compiled once with ``Compiler.json_schema`` (default
options). Each instance is serialized with ``json.dumps`` (default separators,
ASCII escapes), tokenized as a continuation with the tokenizer's own
segmentation, and walked through the guide token by token; the guide accepts it
when every token is allowed in turn and the state at the end is final. An
instance whose tokens do not spell its text byte for byte is skipped.

Per case: valid and accepted is *correct*, valid and rejected is *over*
(over-constrained), invalid and accepted is *under* (under-constrained: the
guide lets through output the schema forbids, the worst outcome), invalid and
rejected is *correct*. A schema that compiles to ``EmptyLanguageError`` counts as
a guide that accepts nothing. Any other constrain error at compile time makes the
whole group *unsupported*; an exception that is not a constrain error is a
*crash* (a bug), recorded with its traceback, and the run goes on.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
import traceback
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

HERE = Path(__file__).resolve().parent
for _path in (HERE.parent, HERE):  # run as a script or loaded by a test: the working tree's constrain, _common
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

import _common  # noqa: E402
import constrain  # noqa: E402
from constrain.testing import accepts, load_offline_tokenizer  # noqa: E402

REPO = _common.REPO
DEFAULT_SUITE = REPO.parent / "shared" / "data" / "json-schema-test-suite"
DRAFT = "draft2020-12"
RESULTS_JSON = _common.RESULTS_DIR / "conformance.json"
DOC = _common.DOCS_DIR / "json_schema_conformance.md"

#: A group whose compile + walks take longer than this is flagged ``slow`` in the results.
SLOW_GROUP_S = 20.0
#: A group still running after this long is stopped and counted unsupported (``Timeout``).
DEFAULT_GROUP_TIMEOUT_S = 120.0

#: Sections of the suite folder, in report order: (key, title, folder under tests/draft2020-12).
SECTIONS = [
    ("core", "Core keywords", ""),
    ("optional", "Optional behaviour", "optional"),
    ("format", "Optional: format assertions", "optional/format"),
]

OUTCOMES = ("correct", "over", "under", "unsupported", "skipped", "crash")


class GroupTimeout(Exception):
    """Raised inside a group that ran past the hard time limit."""


# ---------------------------------------------------------------------- running


def suite_files(suite: Path, only: str | None = None, sections: tuple[str, ...] | None = None) -> list[
    tuple[str, str, Path]
]:
    """``(section, name, path)`` of every test file; ``name`` is relative to the draft folder."""
    root = Path(suite) / "tests" / DRAFT
    if not root.is_dir():
        raise FileNotFoundError(f"no {DRAFT} tests under {suite} (expected the folder {root})")
    found = []
    for key, _, folder in SECTIONS:
        if sections is not None and key not in sections:
            continue
        for path in sorted((root / folder).glob("*.json")):
            name = path.relative_to(root).as_posix()
            if only is None or only in name:
                found.append((key, name, path))
    return found


@contextmanager
def _time_limit(seconds: float | None) -> Iterator[None]:
    """Interrupt the block with :class:`GroupTimeout` after ``seconds`` (main thread on Unix only)."""
    usable = (
        seconds
        and hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
    )
    if not usable:
        yield
        return

    def expire(signum: int, frame: Any) -> None:
        raise GroupTimeout(f"group still running after {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _describe_error(exc: BaseException) -> dict[str, Any]:
    info: dict[str, Any] = {"class": type(exc).__name__, "message": str(exc)}
    for attribute in ("keyword", "pointer", "limit"):
        if hasattr(exc, attribute):
            info[attribute] = getattr(exc, attribute)
    return info


def _crash(exc: BaseException, where: str) -> dict[str, Any]:
    return {
        "class": type(exc).__name__,
        "message": str(exc),
        "where": where,
        "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
    }


def _reason_label(error: dict[str, Any]) -> str:
    """A short label for why a group is unsupported: the keyword, else the error class."""
    if error.get("keyword"):
        return str(error["keyword"])
    if error["class"] == "LimitExceededError" and error.get("limit"):
        return f"LimitExceededError({error['limit']})"
    return error["class"]


def run_group(
    compiler: constrain.Compiler, tokenizer: Any, group: dict[str, Any], timeout_s: float | None,
    options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Compile one group's schema and classify each of its tests."""
    result: dict[str, Any] = {
        "description": group.get("description", ""),
        "schema": group.get("schema"),
        "status": "compiled",  # compiled | empty | unsupported | crash
        "error": None,
        "seconds": 0.0,
        "slow": False,
        "cases": [],
    }
    tests = group.get("tests", [])
    start = time.perf_counter()
    guide = None
    try:
        with _time_limit(timeout_s):
            try:
                guide = compiler.json_schema(group.get("schema"), **(options or {}))
            except constrain.EmptyLanguageError as exc:
                result["status"] = "empty"
                result["error"] = _describe_error(exc)
            except constrain.ConstrainError as exc:
                result["status"] = "unsupported"
                result["error"] = _describe_error(exc)
            except GroupTimeout:
                raise
            except Exception as exc:  # a bug in constrain: record it and go on
                result["status"] = "crash"
                result["error"] = _crash(exc, "compile")
            if result["status"] in ("compiled", "empty"):
                for test in tests:
                    result["cases"].append(_run_case(compiler, tokenizer, guide, test))
    except GroupTimeout as exc:
        result["status"] = "unsupported"
        result["error"] = {"class": "Timeout", "message": str(exc)}
        result["cases"] = []
    result["seconds"] = round(time.perf_counter() - start, 3)
    result["slow"] = result["seconds"] > SLOW_GROUP_S
    if result["status"] in ("unsupported", "crash"):
        outcome = "unsupported" if result["status"] == "unsupported" else "crash"
        result["cases"] = [
            {"description": t.get("description", ""), "data": t.get("data"), "valid": t.get("valid"),
             "outcome": outcome}
            for t in tests
        ]  # fmt: skip
    return result


def _run_case(compiler: constrain.Compiler, tokenizer: Any, guide: Any, test: dict[str, Any]) -> dict[str, Any]:
    case: dict[str, Any] = {
        "description": test.get("description", ""),
        "data": test.get("data"),
        "valid": bool(test.get("valid")),
    }
    text = json.dumps(test.get("data"))
    ids = _common.spelled_ids(tokenizer, compiler.vocabulary, text)
    if ids is None:
        case["outcome"] = "skipped"
        case["note"] = "the tokenizer's ids do not spell the instance byte for byte"
        return case
    if guide is None:  # EmptyLanguageError: nothing is accepted
        accepted = False
    else:
        try:
            accepted = accepts(guide, ids)
        except GroupTimeout:
            raise
        except constrain.ConstrainError as exc:  # e.g. a limit reached while building rows lazily
            case["outcome"] = "unsupported"
            case["error"] = _describe_error(exc)
            return case
        except Exception as exc:
            case["outcome"] = "crash"
            case["error"] = _crash(exc, "walk")
            return case
    case["accepted"] = accepted
    if accepted == case["valid"]:
        case["outcome"] = "correct"
    else:
        case["outcome"] = "over" if case["valid"] else "under"
    return case


def file_status(counts: dict[str, int], groups: list[dict[str, Any]]) -> str:
    """One word for a file: under-constrained > crash > over-constrained > unsupported > partial > correct."""
    if counts["under"]:
        return "under-constrained"
    if counts["crash"] or any(g["status"] == "crash" for g in groups):
        return "crash"
    if counts["over"]:
        return "over-constrained"
    compiled = [g for g in groups if g["status"] in ("compiled", "empty")]
    if groups and not compiled:
        return "unsupported"
    if counts["unsupported"] or len(compiled) < len(groups):
        return "partial"
    return "correct"


def run_file(
    compiler: constrain.Compiler, tokenizer: Any, path: Path, timeout_s: float | None = DEFAULT_GROUP_TIMEOUT_S, options: dict[str, Any] | None = None) -> dict[str, Any]:
    groups = [run_group(compiler, tokenizer, g, timeout_s, options) for g in json.loads(Path(path).read_text("utf-8"))]
    counts = Counter({k: 0 for k in OUTCOMES})
    reasons: Counter[str] = Counter()
    for g in groups:
        counts.update(c["outcome"] for c in g["cases"])
        if g["status"] == "unsupported":
            reasons[_reason_label(g["error"])] += 1
        elif g["status"] == "crash":
            reasons["crash: " + g["error"]["class"]] += 1
        for c in g["cases"]:
            if c.get("error"):  # refused or crashed while walking, not compiling
                prefix = "crash in walk: " if c["outcome"] == "crash" else "walk: "
                reasons[prefix + _reason_label(c["error"])] += 1
    return {
        "counts": dict(counts),
        "status": file_status(counts, groups),
        "groups": groups,
        "reasons": dict(reasons.most_common()),
        "seconds": round(sum(g["seconds"] for g in groups), 3),
    }


def load_remotes(suite: Path) -> dict[str, Any]:
    """The suite's remote documents under the URIs its tests use (http://localhost:1234/...)."""
    folder = suite / "remotes"
    return {
        "http://localhost:1234/" + path.relative_to(folder).as_posix(): json.loads(path.read_text("utf-8"))
        for path in sorted(folder.rglob("*.json"))
    } if folder.is_dir() else {}


#: The specification's reading of objects: undeclared properties allowed, members in any order.
SPEC_OPTIONS: dict[str, Any] = {"strict_properties": False, "property_order": "any"}


def run_suite(
    suite: Path | str,
    tokenizer: Any,
    *,
    compiler: constrain.Compiler | None = None,
    only: str | None = None,
    sections: tuple[str, ...] | None = None,
    timeout_s: float | None = DEFAULT_GROUP_TIMEOUT_S,
    progress: Any = None,
    options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run every selected file; returns the full report (what ``conformance.json`` holds).

    ``options`` go to ``Compiler.json_schema``; the default is the specification's
    semantics (:data:`SPEC_OPTIONS`), since the suite tests the specification.
    """
    options = dict(SPEC_OPTIONS if options is None else options)
    options.setdefault("remotes", load_remotes(Path(suite)))
    suite = Path(suite)
    compiler = compiler or constrain.Compiler(tokenizer)
    started = time.perf_counter()
    files: dict[str, dict[str, Any]] = {}
    for section, name, path in suite_files(suite, only, sections):
        # Draft 2020-12 treats format as an annotation unless the format-assertion vocabulary
        # is on; only the optional/format files assume it is.
        formats = "assert" if section == "format" else "annotate"
        result = run_file(compiler, tokenizer, path, timeout_s, {"formats": formats, **options})
        result["section"] = section
        files[name] = result
        if progress is not None:
            c = result["counts"]
            progress(f"{name:<45} {result['status']:<18} {result['seconds']:7.2f}s  under={c['under']}")
    report = {
        "suite": str(suite),
        "suite_commit": _suite_commit(suite),
        "draft": DRAFT,
        "constrain_version": constrain.__version__,
        "tokenizer_vocabulary_size": compiler.vocabulary.size,
        "seconds": round(time.perf_counter() - started, 2),
        "totals": {key: _totals([f for f in files.values() if f["section"] == key]) for key, _, _ in SECTIONS},
        "files": files,
    }
    report["totals"]["all"] = _totals(list(files.values()))
    report["under_constrained"] = [
        {"file": name, "group": g["description"], "test": c["description"], "schema": g["schema"], "data": c["data"],
         "text": json.dumps(c["data"])}
        for name, f in files.items() for g in f["groups"] for c in g["cases"] if c["outcome"] == "under"
    ]  # fmt: skip
    report["crashes"] = [
        {"file": name, "group": g["description"], "test": c["description"] if c else None, "schema": g["schema"],
         **(c["error"] if c else g["error"])}
        for name, f in files.items() for g in f["groups"]
        for c in ([None] if g["status"] == "crash" else [c for c in g["cases"] if c["outcome"] == "crash"])
    ]  # fmt: skip
    report["slow_groups"] = [
        {"file": name, "group": g["description"], "seconds": g["seconds"]}
        for name, f in files.items() for g in f["groups"] if g["slow"]
    ]  # fmt: skip
    return report


def _totals(files: list[dict[str, Any]]) -> dict[str, Any]:
    counts = Counter({k: 0 for k in OUTCOMES})
    for f in files:
        counts.update(f["counts"])
    return {
        "files": len(files),
        "cases": sum(counts.values()),
        **dict(counts),
        "file_status": dict(Counter(f["status"] for f in files).most_common()),
    }


def _suite_commit(suite: Path) -> str | None:
    marker = suite / "COMMIT"
    return marker.read_text().strip() if marker.is_file() else None


# ---------------------------------------------------------------------- output


def _reasons_text(reasons: dict[str, int], limit: int = 4) -> str:
    items = [(k, n) for k, n in reasons.items() if n]
    shown = ", ".join(f"`{k}` ×{n}" for k, n in items[:limit])
    return shown + (f", … ({len(items) - limit} more)" if len(items) > limit else "")


def summary_table(report: dict[str, Any]) -> str:
    header = f"{'file':<45} {'status':<18} {'ok':>5} {'over':>5} {'under':>5} {'unsup':>5} {'skip':>5} {'crash':>5}  reason"
    lines = [header, "-" * len(header)]
    for key, title, _ in SECTIONS:
        names = [n for n, f in report["files"].items() if f["section"] == key]
        if not names:
            continue
        lines.append(f"[{title}]")
        for name in names:
            f = report["files"][name]
            c = f["counts"]
            reason = ", ".join(f"{k}×{n}" for k, n in f["reasons"].items() if n)
            lines.append(
                f"{name:<45} {f['status']:<18} {c['correct']:>5} {c['over']:>5} {c['under']:>5} "
                f"{c['unsupported']:>5} {c['skipped']:>5} {c['crash']:>5}  {reason}"
            )
    lines.append("-" * len(header))
    for key in [k for k, _, _ in SECTIONS] + ["all"]:
        t = report["totals"][key]
        if not t["files"]:
            continue
        lines.append(
            f"{'TOTAL ' + key + ' (' + str(t['files']) + ' files)':<45} {'':<18} {t['correct']:>5} {t['over']:>5} "
            f"{t['under']:>5} {t['unsupported']:>5} {t['skipped']:>5} {t['crash']:>5}"
        )
    lines.append(f"{len(report['under_constrained'])} under-constrained case(s), {len(report['crashes'])} crash(es), "
                 f"{report['seconds']:.1f} s")  # fmt: skip
    return "\n".join(lines)


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(report: dict[str, Any], tokenizer_name: str) -> str:
    out = [
        "# JSON Schema conformance",
        "",
        "<!-- Generated by `python benchmarks/conformance.py`; do not edit by hand. -->",
        "",
        "*This page is generated by `python benchmarks/conformance.py` and must not be edited by hand.*",
        "",
        "How closely `Compiler.json_schema` follows the official "
        "[JSON Schema Test Suite](https://github.com/json-schema-org/JSON-Schema-Test-Suite) "
        f"for {DRAFT}" + (f" (commit `{report['suite_commit'][:12]}`)" if report.get("suite_commit") else "") + ".",
        "",
        "## Method",
        "",
        "Each test group's schema is compiled once with the specification's semantics "
        "(`strict_properties=False, property_order=\"any\"`; `--strict` runs constrain's defaults), the "
        "suite's `remotes/` registered as `remotes=`, and the "
        f"`{tokenizer_name}` tokenizer. Each instance is serialized with `json.dumps` (default separators, "
        "ASCII escapes), tokenized the way the tokenizer itself spells it after earlier text, and fed to "
        "the guide one token at a time; the guide *accepts* the instance when every token is allowed in "
        "turn and the guide may stop after the last one. A valid instance that is accepted, or an invalid "
        "one that is rejected, is **correct**; a rejected valid instance is **over**-constrained (the guide "
        "forbids output the schema allows); an accepted invalid instance is **under**-constrained (the "
        "guide lets through output the schema forbids, the outcome that must never happen). A schema "
        "the guide reports as matching nothing (`EmptyLanguageError`) counts as a guide that accepts "
        "nothing. When compiling raises any other constrain error (for instance `UnsupportedSchemaError` "
        "for a keyword a regular language cannot enforce), all of that group's cases count as "
        "**unsupported**: constrain refuses the schema rather than guide it wrongly. Instances whose "
        "tokens do not spell their text byte for byte are **skipped**. An exception that is not a "
        "constrain error is a **crash** (a bug), listed at the end.",
        "",
        "`format` is read as draft 2020-12 reads it by default, an annotation (`formats=\"annotate\"`), "
        "except in the `optional/format` files, which assume the format-assertion vocabulary and run with "
        "constrain's default (`formats=\"assert\"`); a schema whose meta-schema declares that vocabulary "
        "asserts formats in either case. What still shapes the over-constrained counts: numbers are matched "
        "by their spelling, so `1.0` is refused where the schema means the integer `1` (`type: integer`, "
        "`const`, `enum`, integer bounds), and a format's characters must be written raw, not as `\\u` "
        "escapes (the runner's `json.dumps` escapes non-ASCII text).",
        "",
        "A file is *correct* when every group compiled and every case is correct, *under-constrained* "
        "when any case is under-constrained, *over-constrained* when any case is over-constrained (and "
        "none under), *unsupported* when no group compiled, and *partial* when some groups were refused "
        "and the rest are correct (a file with a crash is *crash*). The *reason* column names the "
        "keywords (or error classes) that refused, with how many groups each refused.",
        "",
        "## Totals",
        "",
        "| section | files | cases | correct | over | under | unsupported | skipped | crash |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for key, title, _ in SECTIONS + [("all", "All", "")]:
        t = report["totals"][key]
        if t["files"]:
            out.append(
                f"| {title} | {t['files']} | {t['cases']} | {t['correct']} | {t['over']} | {t['under']} | "
                f"{t['unsupported']} | {t['skipped']} | {t['crash']} |"
            )
    for key, title, folder in SECTIONS:
        names = [n for n, f in report["files"].items() if f["section"] == key]
        if not names:
            continue
        where = f"`tests/{DRAFT}/{folder}`" if folder else f"`tests/{DRAFT}`"
        out += [
            "",
            f"## {title}",
            "",
            f"Files in {where}.",
            "",
            "| file (keyword) | status | correct | over | under | unsupported | skipped | crash | reason |",
            "|---|---|--:|--:|--:|--:|--:|--:|---|",
        ]
        for name in names:
            f = report["files"][name]
            c = f["counts"]
            keyword = Path(name).stem
            reason = _reasons_text(f["reasons"])
            out.append(
                f"| `{keyword}` | {f['status']} | {c['correct']} | {c['over']} | {c['under']} | "
                f"{c['unsupported']} | {c['skipped']} | {c['crash']} | {_md_cell(reason)} |"
            )
    out += ["", "## Under-constrained cases", ""]
    if report["under_constrained"]:
        out += ["| file | group | test | instance |", "|---|---|---|---|"]
        for u in report["under_constrained"]:
            out.append(
                f"| `{u['file']}` | {_md_cell(u['group'])} | {_md_cell(u['test'])} | `{_md_cell(u['text'][:80])}` |"
            )
    else:
        out.append("None.")
    if report["crashes"]:
        out += ["", "## Crashes", "", "| file | group | error |", "|---|---|---|"]
        for c in report["crashes"]:
            out.append(f"| `{c['file']}` | {_md_cell(c['group'])} | `{_md_cell(c['class'])}` |")
    out.append("")
    return "\n".join(out)


def write_outputs(report: dict[str, Any], tokenizer_name: str, *, page: bool = True) -> None:
    document = {**_common.machine(), "tokenizer": tokenizer_name, **report}
    _common.write_results(RESULTS_JSON.stem, document, directory=RESULTS_JSON.parent)
    if page:
        DOC.write_text(markdown(report, tokenizer_name), "utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", type=Path, default=DEFAULT_SUITE,
                        help="the JSON-Schema-Test-Suite folder (holding tests/); default: %(default)s")  # fmt: skip
    parser.add_argument("--tokenizer", default="smollm2", help="offline tokenizer name (default: %(default)s)")
    parser.add_argument("--only", help="run only the files whose path (relative to the draft folder) contains this")
    parser.add_argument("--no-write", action="store_true", help="print only; do not write the JSON and the docs page")
    parser.add_argument("--group-timeout", type=float, default=DEFAULT_GROUP_TIMEOUT_S,
                        help="stop a group after this many seconds and count it unsupported (0: no limit)")  # fmt: skip
    parser.add_argument("--quiet", action="store_true", help="no per-file progress lines")
    parser.add_argument("--strict", action="store_true",
                        help="compile with constrain's defaults (closed objects, definition order) instead of "
                             "the specification's semantics")  # fmt: skip
    args = parser.parse_args(argv)

    suite = args.suite if args.suite.is_absolute() else (Path.cwd() / args.suite)
    if not (suite / "tests" / DRAFT).is_dir():
        parser.error(f"the test suite is not at {suite} (no tests/{DRAFT}); pass --suite PATH")
    tokenizer = load_offline_tokenizer(args.tokenizer)
    progress = None if args.quiet else (lambda line: print(line, file=sys.stderr, flush=True))
    report = run_suite(suite, tokenizer, only=args.only, timeout_s=args.group_timeout or None, progress=progress,
                       options={} if args.strict else SPEC_OPTIONS)  # fmt: skip
    print(summary_table(report))
    for u in report["under_constrained"]:
        print(f"UNDER {u['file']} | {u['group']} | {u['test']} | schema={json.dumps(u['schema'])} | data={u['text']}")
    for c in report["crashes"]:
        print(f"CRASH {c['file']} | {c['group']} | {c['test']}\n{c['traceback']}")
    if not args.no_write:
        write_outputs(report, args.tokenizer, page=not args.only)
        if args.only:
            print(f"partial run: {DOC.relative_to(REPO)} left as it is")
        else:
            print(f"wrote {DOC.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
