"""Reading manifests: YAML or JSON text to documents, each with a map from field path to line.

Parsing follows what ``kubectl`` accepts: a stream of ``---``-separated YAML documents (JSON is YAML),
empty documents skipped, ``kind: List`` expanded into its items. Timestamps stay strings (objects are
JSON), and a key repeated in one mapping is an error, as in kubectl's YAML reader.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

import yaml

from flexq.api.object_errors import InputError

__all__ = ["MAX_INPUT_BYTES", "MAX_NESTING", "Document", "decode_input", "duplicate_keys", "format_path",
           "load_documents", "load_yaml", "nesting", "numbers_only", "text_only"]

MAX_INPUT_BYTES: Final = 8 * 1024 * 1024
"""The largest manifest flexq reads at once (the API server's own request limit is 3 MiB an object)."""
ALIAS_ALLOWANCE: Final = 10_000
"""Nodes a document's aliases may add when expanded, beyond four times the nodes written: YAML's anchors let 400
bytes stand for billions of nodes (an alias bomb); the API server's YAML reader refuses such "excessive aliasing"
too."""
MAX_NESTING: Final = 100
"""How deep mappings and sequences may nest in a manifest or a request body (Kubernetes objects nest a few tens
deep). YAML's reader, and every walk of what it read, recurses once a level: text nested thousands deep would
run out of Python's stack."""


class _Bounded(yaml.SafeLoader):
    """SafeLoader that refuses (:class:`InputError`, naming ``source`` and the line), as it reads, mappings and
    sequences nested deeper than :data:`MAX_NESTING`: before its composer, which recurses once a level, goes that
    deep."""

    _depth = 0
    source = "the manifest"

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        opening = self.check_event(yaml.SequenceStartEvent, yaml.MappingStartEvent)
        if opening:
            if self._depth >= MAX_NESTING:
                raise InputError(self.source, f"malformed YAML: nested deeper than {MAX_NESTING} levels",
                                 self.get_mark().line + 1)
            self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            if opening:
                self._depth -= 1


class _Loader(_Bounded):
    """SafeLoader without the timestamp resolver: dates stay strings, as in JSON."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


@dataclass(slots=True)
class Document:
    """One object as read: its data, where it came from, and the line of each field path."""

    obj: dict[str, Any]
    source: str
    index: int
    line: int = 1
    lines: dict[str, int] = field(default_factory=dict)

    def line_of(self, path: str) -> int | None:
        """The line of ``path`` or of its nearest ancestor that has one."""
        while True:
            if path in self.lines:
                return self.lines[path]
            if not path:
                return self.line
            path = _parent(path)


_LAST: Final = re.compile(r"(\.[^.\[]+|\[\d+\])$")


def _parent(path: str) -> str:
    return _LAST.sub("", path, count=1) if _LAST.search(path) else ""


def format_path(parts: tuple[str | int, ...] | list[str | int]) -> str:
    """``("spec", "flavors", 2, "name")`` -> ``spec.flavors[2].name``."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def decode_input(data: bytes, source: str) -> str:
    """Bytes to text, refusing what is too large or is not text."""
    if len(data) > MAX_INPUT_BYTES:
        raise InputError(
            source,
            f"input is {len(data):,} bytes, more than the {MAX_INPUT_BYTES // (1024 * 1024)} MiB "
            "flexq reads at once; split it into smaller files",
        )
    nul = data.find(b"\x00")
    if nul >= 0:
        raise InputError(source, f"not a YAML or JSON manifest: binary data (a NUL byte at offset {nul})")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(
            source, f"not a YAML or JSON manifest: not UTF-8 text (byte offset {exc.start})"
        ) from None


def _expanded(node: yaml.Node, memo: dict[int, tuple[int, int]]) -> tuple[int, int]:
    """How many nodes ``node`` stands for with every alias expanded, and how deep its mappings and sequences then
    nest (``memo``: by node, those counted so far)."""
    known = memo.get(id(node))
    if known is not None:
        return known
    memo[id(node)] = (1, 0)  # a node that contains itself counts once (PyYAML refuses such recursion anyway)
    if isinstance(node, yaml.MappingNode | yaml.SequenceNode):
        children = [c for pair in node.value for c in pair] if isinstance(node, yaml.MappingNode) else node.value
        counted = [_expanded(child, memo) for child in children]
        size, depth = 1 + sum(n for n, _ in counted), 1 + max((d for _, d in counted), default=0)
    else:
        size, depth = 1, 0
    memo[id(node)] = (size, depth)
    return size, depth


def _check_aliases(node: yaml.Node, source: str) -> None:
    memo: dict[int, tuple[int, int]] = {}
    try:
        size, depth = _expanded(node, memo)
    except RecursionError:
        raise InputError(source, "malformed YAML: nested too deeply", node.start_mark.line + 1) from None
    if size > 4 * len(memo) + ALIAS_ALLOWANCE:
        raise InputError(source, f"malformed YAML: excessive aliasing (anchors and aliases that expand to {size:,} "
                         f"nodes from {len(memo):,})", node.start_mark.line + 1)
    if depth > MAX_NESTING:
        raise InputError(source, f"malformed YAML: nested deeper than {MAX_NESTING} levels (its aliases expanded)",
                         node.start_mark.line + 1)


def nesting(value: Any) -> int:
    """How deep ``value``'s objects and lists nest (a scalar: 0; counted up to one past :data:`MAX_NESTING`),
    without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        depth += 1
        if depth > MAX_NESTING:
            return depth
        deepest = max(deepest, depth)
        stack.extend((child, depth) for child in children)
    return deepest


def _loader(kind: type[_Bounded], text: str, source: str) -> _Bounded:
    try:
        loader = kind(text)
        loader.source = source
        return loader
    except yaml.YAMLError as exc:  # the reader refuses unprintable characters at once
        raise InputError(source, f"malformed YAML: {exc}".replace("\n", " ")) from None


def load_yaml(text: str, source: str, duplicates: list[str] | None = None) -> Any:
    """One YAML (or JSON) document, as ``yaml.safe_load`` reads it, with aliasing bounded (:data:`ALIAS_ALLOWANCE`);
    :class:`InputError` for what cannot be read. The keys a mapping repeats (the last is kept) are added to
    ``duplicates`` where it is given, as the API server words them."""
    loader = _loader(_Bounded, text, source)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if "*" in text:
            _check_aliases(node, source)
        if duplicates is not None:
            duplicates.extend(duplicate_keys(node))
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise InputError(source, f"malformed YAML: {exc}".replace("\n", " ")) from None
    finally:
        loader.dispose()


def duplicate_keys(node: yaml.Node) -> list[str]:
    """The keys repeated in a mapping under ``node``: ``line 3: key "name" already set in map``."""
    found: list[tuple[int, str]] = []
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, yaml.MappingNode):
            seen: set[str] = set()
            for key_node, value_node in item.value:
                if isinstance(key_node, yaml.ScalarNode):
                    if key_node.value in seen:
                        found.append((key_node.start_mark.line + 1, key_node.value))
                    seen.add(key_node.value)
                stack.append(value_node)
        elif isinstance(item, yaml.SequenceNode):
            stack.extend(item.value)
    return [f'line {line}: key "{key}" already set in map' for line, key in sorted(found)]


_INT64: Final = (-(1 << 63), (1 << 63) - 1)


def numbers_only(value: Any, source: str, line_of: Callable[[str], int | None] | None = None) -> None:
    """Refuse (:class:`InputError`, naming the field and, with ``line_of``, its line) a number the API server cannot
    hold: an integer beyond 64 bits, or a float that is not finite (``1e400``, NaN, Infinity, YAML's ``.inf``), which
    Go's JSON reader refuses and JSON cannot write."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(value, ())]
    while stack:
        item, path = stack.pop()
        if isinstance(item, dict):
            stack.extend((v, (*path, str(k))) for k, v in item.items())
        elif isinstance(item, list):
            stack.extend((v, (*path, i)) for i, v in enumerate(item))
        elif isinstance(item, bool):
            continue
        elif isinstance(item, int) and not _INT64[0] <= item <= _INT64[1]:
            _refuse_number(source, path, f"the number {item} is out of range: integers are 64-bit "
                           f"({_INT64[0]} to {_INT64[1]})", line_of)
        elif isinstance(item, float) and not math.isfinite(item):
            what = "not a number (NaN)" if math.isnan(item) else "a number too large for a 64-bit float (infinite)"
            _refuse_number(source, path, f"{what}: numbers are finite 64-bit floats", line_of)


def _refuse_number(source: str, path: tuple[str | int, ...], message: str,
                   line_of: Callable[[str], int | None] | None) -> None:
    where = format_path(path)
    raise InputError(source, f"{where or 'the value'}: {message}", line_of(where) if line_of else None)


def text_only(value: Any, source: str, line: int = 1) -> Any:
    """``value`` (parsed JSON or YAML) with UTF-16 surrogate pairs (JSON's ``\\ud83d\\udca5``, which YAML reads one
    by one) joined; :class:`InputError` for a lone surrogate, which is not text and could not be written out
    again."""
    if isinstance(value, str):
        if not any("\ud800" <= c <= "\udfff" for c in value):
            return value
        try:
            return value.encode("utf-16", "surrogatepass").decode("utf-16")
        except UnicodeDecodeError:
            raise InputError(source, "malformed text: an unpaired UTF-16 surrogate escape (\\ud800-\\udfff)",
                             line) from None
    if isinstance(value, dict):
        return {text_only(k, source, line): text_only(v, source, line) for k, v in value.items()}
    if isinstance(value, list):
        return [text_only(v, source, line) for v in value]
    return value


def load_documents(text: str, source: str) -> list[Document]:
    """Parse every document of ``text``; raise :class:`InputError` on malformed YAML."""
    loader = _loader(_Loader, text, source)
    docs: list[Document] = []
    aliases = "*" in text
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            if aliases:
                _check_aliases(node, source)
            lines: dict[str, int] = {}
            _walk(node, "", lines, source)
            data = text_only(loader.construct_document(node), source, node.start_mark.line + 1)
            if data is None:
                continue
            if not isinstance(data, dict):
                raise InputError(
                    source,
                    f"document {len(docs) + 1}: expected a mapping with apiVersion and kind, "
                    f"got {type(data).__name__}",
                    node.start_mark.line + 1,
                )
            read = _expand(data, source, len(docs), node.start_mark.line + 1, lines)
            for doc in read:
                numbers_only(doc.obj, source, doc.line_of)
            docs.extend(read)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        problem = exc.problem or exc.context or "malformed YAML"
        raise InputError(source, f"malformed YAML: {problem}", line) from None
    except yaml.YAMLError as exc:
        raise InputError(source, f"malformed YAML: {exc}") from None
    finally:
        loader.dispose()
    return docs


def _expand(data: dict[str, Any], source: str, index: int, line: int, lines: dict[str, int]) -> list[Document]:
    if data.get("kind") == "List" and isinstance(data.get("items"), list):
        out: list[Document] = []
        for i, item in enumerate(data["items"]):
            if not isinstance(item, dict):
                raise InputError(source, f"items[{i}]: expected an object", lines.get(f"items[{i}]", line))
            prefix = f"items[{i}]"
            sub = {
                k[len(prefix) + 1 :]: v
                for k, v in lines.items()
                if k.startswith(prefix + ".") or k.startswith(prefix + "[")
            }
            out.append(Document(item, source, index + i, lines.get(prefix, line), sub))
        return out
    return [Document(data, source, index, line, lines)]


def _walk(node: yaml.Node, path: str, lines: dict[str, int], source: str, line: int | None = None) -> None:
    """Record the line of ``path`` (``line``: its key's, where it has one) and of everything under it."""
    lines[path] = line if line is not None else node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        seen: set[Any] = set()
        for key_node, value_node in node.value:
            key = key_node.value
            if isinstance(key_node, yaml.ScalarNode):
                if key in seen:
                    raise InputError(
                        source, f'malformed YAML: key "{key}" appears twice', key_node.start_mark.line + 1
                    )
                seen.add(key)
            _walk(value_node, f"{path}.{key}" if path else str(key), lines, source, key_node.start_mark.line + 1)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _walk(item, f"{path}[{i}]", lines, source)
