"""Where a ``$ref`` points: base URIs, anchors, JSON pointers and remote documents.

A ``$ref`` is a URI reference resolved against the base URI in effect where it is
written: the document's, changed by every ``$id`` on the way down (``id`` in draft 4
documents). The fragment is a JSON pointer (``#/$defs/a``) or an anchor name
(``$anchor``, or a draft-7 ``$id: "#name"``). One pass over the document (and over the
remote documents the caller registers) records, for every object in it, the base URI in
effect there, every resource by its absolute URI and every anchor; the walker then asks
:meth:`References.lookup` with the base of the object that holds the ``$ref``.

Iterative throughout: a deeply nested document never reaches Python's recursion limit.
"""

from __future__ import annotations

import re
from typing import Any, Mapping
from urllib.parse import unquote, urldefrag, urljoin, urlsplit, urlunsplit, uses_relative

__all__ = ["References", "UnresolvedReference"]

#: The base URI of a document that declares none (hierarchical, so ``urljoin`` resolves against it).
DEFAULT_BASE = "https://constrain.invalid/schema.json"  # .invalid: never a real host


class UnresolvedReference(Exception):
    """A ``$ref`` whose target is not in the document or the registered remotes."""


class References:
    """The resources, anchors and per-object base URIs of one schema document."""

    def __init__(self, root: Any, remotes: Mapping[str, Any] | None = None) -> None:
        self.resources: dict[str, Any] = {}
        self.anchors: dict[str, Any] = {}
        self._bases: dict[int, str] = {}
        dialect = str(root.get("$schema", "")) if isinstance(root, dict) else ""
        self._draft4 = "draft-04" in dialect
        #: Drafts 3 to 7 (by the document's ``$schema``): a ``$ref`` stands for its target
        #: alone and every keyword beside it is ignored. From 2019-09 on it applies beside
        #: its siblings, and a document that names no draft is read as 2020-12.
        self.ref_overrides = bool(re.search(r"draft-0[3-7]/", dialect))
        #: The keywords the document's draft does not define: annotations there, as every
        #: unknown keyword is (a draft-04 validator ignores "const" and "if").
        self.lacks: frozenset[str] = next((lacks for marker, lacks in _LACKS if marker in dialect), frozenset())
        #: The walker writes older spellings in 2020-12 names (``dependencies`` becomes
        #: ``dependentRequired``/``dependentSchemas``, array ``items`` becomes ``prefixItems``)
        #: and reads its own output again. So in a draft that lacks those names, whether one
        #: is an annotation depends on who wrote the object: the ids of every object and list
        #: of the documents (which stay alive as long as this) tell.
        self._documents = (root, *(remotes or {}).values())
        self._written: frozenset[int] = _ids(*self._documents) if self.lacks & REWRITTEN else frozenset()
        self._document_ids: frozenset[int] | None = None
        for uri, document in (remotes or {}).items():
            self._index(document, urldefrag(uri)[0])
        self.root_base = self._index(root, DEFAULT_BASE)

    def lacks_in(self, schema: Any) -> frozenset[str]:
        """The keywords that are annotations in ``schema``: what the draft lacks, less the
        names the walker writes for the draft's own spellings where the walker wrote ``schema``."""
        return self.lacks if id(schema) in self._written else self.lacks - REWRITTEN

    def in_documents(self, schema: Any) -> bool:
        """Whether ``schema`` is an object or list of the documents themselves: those the walker never
        changes (it works on copies), so what is read from one may be kept by its id."""
        if self._document_ids is None:
            self._document_ids = self._written or _ids(*self._documents)
        return id(schema) in self._document_ids

    def base_of(self, schema: Any, default: str) -> str:
        """The base URI in effect at ``schema`` (an object of the document), else ``default``."""
        return self._bases.get(id(schema), default)

    def absolute(self, ref: str, base: str) -> str:
        return resolve(base, ref)

    def short(self, absolute: str) -> str:
        """A reference as a message shows it: ``#/$defs/a`` inside the document itself."""
        return absolute[len(DEFAULT_BASE):] if absolute.startswith(DEFAULT_BASE + "#") else absolute

    def lookup(self, absolute: str) -> tuple[Any, str]:
        """The schema an absolute URI reference points to, and the base URI in effect there."""
        uri, fragment = urldefrag(absolute)
        if fragment and not fragment.startswith("/"):
            target = self.anchors.get(f"{uri}#{unquote(fragment)}")
            if target is None:
                raise UnresolvedReference(f"no anchor {fragment!r} in {uri}")
            return target, self.base_of(target, uri)
        if uri not in self.resources:
            raise UnresolvedReference(f"{uri} is neither this document nor a registered remote")
        target = self.resources[uri]
        for part in unquote(fragment).split("/")[1:]:  # a JSON pointer, percent-decoded first
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(target, dict) and part in target:
                target = target[part]
            elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
                target = target[int(part)]
            else:
                raise UnresolvedReference(f"the pointer {fragment!r} does not resolve in {uri}")
        return target, self.base_of(target, uri)

    def _index(self, document: Any, base: str) -> str:
        """Record bases, resources and anchors under ``document``; returns the document's own base."""
        top = self._rebase(document, base)
        self.resources.setdefault(top, document)
        self.resources.setdefault(base, document)
        stack = [(document, base)]
        while stack:
            node, outer = stack.pop()
            if not isinstance(node, dict):
                continue
            here = self._rebase(node, outer)
            if here != outer:
                self.resources.setdefault(here, node)
            self._bases.setdefault(id(node), here)
            for key in ("$anchor", "$dynamicAnchor"):
                if isinstance(node.get(key), str):
                    self.anchors.setdefault(f"{here}#{node[key]}", node)
            for key in ("$id", "id"):
                value = node.get(key)
                if isinstance(value, str) and value.startswith("#") and len(value) > 1:  # a draft-7 anchor
                    self.anchors.setdefault(f"{here}#{value[1:]}", node)
            stack.extend((sub, here) for sub in _subschemas(node))
        return top

    def _rebase(self, node: Any, base: str) -> str:
        if not isinstance(node, dict):
            return base
        value = node.get("$id")
        if not isinstance(value, str) and self._draft4:
            value = node.get("id")
        if isinstance(value, str) and not value.startswith("#"):
            return urldefrag(resolve(base, value))[0]
        return base


def resolve(base: str, ref: str) -> str:
    """``ref`` resolved against ``base`` as RFC 3986 (section 5.2) says, for every scheme.

    ``urljoin`` resolves only against the schemes it lists as hierarchical: against
    ``urn:uuid:…`` it returns ``#/$defs/a`` unchanged, so a pointer inside a document whose
    ``$id`` is a URN would look remote. Those schemes keep ``urljoin``; the others (``urn:``,
    ``tag:``) are resolved here.
    """
    if not ref:
        return base
    parts = urlsplit(ref)
    outer = urlsplit(base)
    if parts.scheme or outer.scheme in uses_relative:
        return urljoin(base, ref)
    netloc, path, query = outer.netloc, outer.path, outer.query
    if parts.netloc:
        netloc, path, query = parts.netloc, _without_dot_segments(parts.path), parts.query
    elif parts.path:
        if not parts.path.startswith("/"):  # merge: the base's path up to its last "/", then ref's
            cut = path.rfind("/")
            path = ("/" if netloc and not path else path[: cut + 1]) + parts.path
        path, query = _without_dot_segments(path), parts.query
    elif "?" in ref.split("#", 1)[0]:
        query = parts.query
    return urlunsplit((outer.scheme, netloc, path, query, parts.fragment))


def _without_dot_segments(path: str) -> str:
    """RFC 3986 section 5.2.4: ``a/b/../c`` is ``a/c``."""
    out: list[str] = []
    segments = path.split("/")
    for k, segment in enumerate(segments):
        if segment == "..":
            if len(out) > 1 or (out and out[0]):
                out.pop()
            if k == len(segments) - 1:
                out.append("")
        elif segment == ".":
            if k == len(segments) - 1:
                out.append("")
        else:
            out.append(segment)
    return "/".join(out)


def _ids(*documents: Any) -> frozenset[int]:
    """The ids of every object and list in ``documents`` (iterative: no recursion on depth)."""
    seen: set[int] = set()
    stack = list(documents)
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
        else:
            continue
        seen.add(id(node))
    return frozenset(seen)


#: The 2020-12 names the walker gives older spellings (:meth:`References.lacks_in`).
REWRITTEN = frozenset({"dependentRequired", "dependentSchemas", "prefixItems"})
_SINCE_2019 = frozenset({"dependentRequired", "dependentSchemas", "unevaluatedProperties", "unevaluatedItems",
                         "minContains", "maxContains", "$recursiveRef"})  # fmt: skip
_SINCE_2020 = frozenset({"prefixItems", "$dynamicRef"})
#: Per draft (a marker in its meta-schema URI), the assertion keywords later drafts added.
_LACKS = (
    ("draft-04/", frozenset({"const", "contains", "propertyNames", "if", "then", "else"}) | _SINCE_2019
     | _SINCE_2020),
    ("draft-06/", frozenset({"if", "then", "else"}) | _SINCE_2019 | _SINCE_2020),
    ("draft-07/", _SINCE_2019 | _SINCE_2020),
    ("draft/2019-09/", _SINCE_2020),
)

# Where a schema holds schemas. An "$id" anywhere else (inside an unknown keyword, in a
# const) is data, not an identifier: the specification says so, and the suite checks it.
_ONE = ("additionalProperties", "additionalItems", "items", "contains", "not", "if", "then", "else",
        "propertyNames", "unevaluatedItems", "unevaluatedProperties", "contentSchema")  # fmt: skip
_MAP = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies")
_LIST = ("allOf", "anyOf", "oneOf", "prefixItems", "items")


def _subschemas(node: dict[str, Any]) -> list[Any]:
    out: list[Any] = []
    for key in _ONE:
        if isinstance(node.get(key), dict):
            out.append(node[key])
    for key in _MAP:
        if isinstance(node.get(key), dict):
            out += [v for v in node[key].values() if isinstance(v, dict)]
    for key in _LIST:
        if isinstance(node.get(key), list):
            out += [v for v in node[key] if isinstance(v, dict)]
    return out
