"""The docs' reference pages, generated from the code at build time (docs/conf.py calls :func:`fill`).

- ``reference/cli.md``: every command of the ``flexq`` Typer app, its usage, arguments and options;
- ``reference/scenario.md``: the scenario file's fields, from its pydantic schema (``flexq.sim.scenario_schema``);
- ``reference/metrics.md``: every metric family ``/metrics`` serves, from the collector (``flexq.server.prometheus``
  over ``flexq.controller``'s ``Tally`` and ``Sample``).

Nothing here is written by hand: a command, a field or a metric added to the code appears in the docs at the next
build. ``python docs/hooks.py DIR`` writes the three pages into DIR (to read them without building the site).
"""

from __future__ import annotations

import dataclasses
import re
import sys
import types
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

PAGES: dict[str, Callable[[], str]] = {}
"""Generated page (path under docs/) -> the function that writes it."""


def page(path: str) -> Callable[[Callable[[], str]], Callable[[], str]]:
    def register(render: Callable[[], str]) -> Callable[[], str]:
        PAGES[path] = render
        return render
    return register


def _cell(text: str) -> str:
    """Text for one cell of a markdown table."""
    return " ".join(text.split()).replace("|", "\\|")


# --- the CLI -----------------------------------------------------------------------------------------------------

@page("reference/cli.md")
def cli_page() -> str:
    import typer

    from flexq.cli.main import app

    root = typer.main.get_command(app)
    lines = ["# Command line", "",
             "Every command of `flexq`, as `flexq COMMAND --help` prints it: generated from the command line's own "
             "definitions when the docs are built.", ""]
    ctx = root.context_class(root, info_name="flexq")
    lines += _command(root, ctx, "flexq", aliases=[])
    return "\n".join(lines) + "\n"


def _commands(group: Any, ctx: Any) -> Iterator[tuple[str, Any, list[str]]]:
    """A group's commands in order, each with its hidden aliases (commands of the same callback)."""
    listed = getattr(group, "commands", {})
    visible = {name: cmd for name, cmd in listed.items() if not cmd.hidden}
    for name, cmd in sorted(visible.items()):
        aliases = sorted(other for other, alias in listed.items()
                         if alias.hidden and other != name and _function(alias) is _function(cmd))
        yield name, cmd, aliases


def _function(cmd: Any) -> Any:
    """The function behind a command (Typer wraps it once for each name it is registered under)."""
    callback = cmd.callback
    return getattr(callback, "__wrapped__", callback) if callback is not None else object()


def _command(cmd: Any, ctx: Any, path: str, aliases: list[str]) -> list[str]:
    depth = min(path.count(" ") + 2, 4)
    lines = [f"{'#' * depth} `{path}`", ""]
    if cmd.help:
        lines += [_help_text(cmd.help), ""]
    if aliases:
        lines += ["Aliases: " + ", ".join(f"`{a}`" for a in aliases) + ".", ""]
    usage = cmd.get_usage(ctx).removeprefix("Usage: ")
    lines += ["```text", usage, "```", ""]
    rows = [record for param in cmd.params if not getattr(param, "hidden", False)
            if (record := param.get_help_record(ctx)) is not None]
    if rows:
        lines += ["| argument or option | meaning |", "|---|---|"]
        lines += [f"| `{_cell(names)}` | {_cell(text)} |" for names, text in rows]
        lines.append("")
    for name, sub, sub_aliases in _commands(cmd, ctx):
        sub_ctx = sub.context_class(sub, info_name=name, parent=ctx)
        lines += _command(sub, sub_ctx, f"{path} {name}", sub_aliases)
    return lines


def _help_text(text: str) -> str:
    """A command's docstring as markdown: Typer's ``\\b`` (keep lines) markers dropped, paragraphs kept."""
    return "\n".join(line for line in text.replace("\b", "").strip().splitlines())


# --- the scenario format ---------------------------------------------------------------------------------------

@page("reference/scenario.md")
def scenario_page() -> str:
    from pydantic import BaseModel

    from flexq import durations
    from flexq.sim import scenario, scenario_schema

    models: list[type[BaseModel]] = []
    _collect(scenario_schema.ScenarioFile, models)
    lines = ["# Scenario format", "",
             "A scenario (`kind: Scenario`) is what `flexq simulate` replays in virtual time, and its `capacity` "
             "section (the same fields alone) is what `flexq server --capacity FILE` and `flexq import --capacity` "
             "read. This page is generated from the schema the files are checked against "
             "(`flexq.sim.scenario_schema`): unknown fields are refused, naming the file, line and field.", "",
             "## An example, with comments", "",
             _docstring_example(scenario.__doc__ or ""), "",
             "## Durations", "", (durations.__doc__ or "").strip().replace("``", "`"), "",
             "## Fields", ""]
    for model in models:
        lines += [f"### `{model.__name__}`", ""]
        if model.__doc__ and model.__doc__ is not BaseModel.__doc__ and "Usage docs" not in model.__doc__:
            lines += [" ".join(model.__doc__.split()), ""]
        lines += ["| field | type | default | constraint |", "|---|---|---|---|"]
        for name, info in model.model_fields.items():
            field = info.alias or name
            default = "required" if info.is_required() else _default(info)
            lines.append(f"| `{field}` | {_cell(_type(info.annotation, scenario_schema.Duration))} | {default} | "
                         f"{_cell(_constraints(info.metadata))} |")
        lines.append("")
    return "\n".join(lines) + "\n"


def _collect(model: Any, into: list[Any]) -> None:
    """``model`` and every model its fields hold, depth first, each once."""
    from pydantic import BaseModel

    if model in into:
        return
    into.append(model)
    for info in model.model_fields.values():
        for inner in _walk(info.annotation):
            if isinstance(inner, type) and issubclass(inner, BaseModel):
                _collect(inner, into)


def _walk(annotation: Any) -> Iterator[Any]:
    yield annotation
    for arg in typing.get_args(annotation):
        yield from _walk(arg)


def _type(annotation: Any, duration: Any) -> str:
    from pydantic import BaseModel

    if annotation == duration:
        return "duration"
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type(args[0], duration)
    if origin in (typing.Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        inside = list(typing.get_args(duration))  # a union that holds Duration's members holds a duration
        if rest[:len(inside)] == inside:
            rest = [duration, *rest[len(inside):]]
        parts = [_type(a, duration) for a in rest]
        return " or ".join(dict.fromkeys(parts))
    if origin is typing.Literal:
        return " or ".join(f"`{a}`" for a in args)
    if origin is list:
        return f"list of {_type(args[0], duration)}"
    if origin is dict:
        return f"mapping of {_type(args[0], duration)} to {_type(args[1], duration)}"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return f"[`{annotation.__name__}`](#{annotation.__name__.lower()})"
    names = {bool: "boolean", str: "string", int: "integer", float: "number"}
    if annotation is Any:
        return "any"
    for python, name in names.items():
        if annotation is python or (isinstance(annotation, type) and issubclass(annotation, python)):
            return name
    base = getattr(annotation, "__origin__", None)
    if base in names:
        return names[base]
    text = str(annotation)
    if "StrictStr" in text:
        return "string"
    if "StrictInt" in text:
        return "integer"
    raise ValueError(f"docs/hooks.py: no name for the type {annotation!r} of the scenario schema")


def _default(info: Any) -> str:
    value = info.get_default(call_default_factory=True)
    if value is None:
        return "none"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return f"`{value}`"


def _constraints(metadata: list[Any]) -> str:
    symbols = {"gt": ">", "ge": "≥", "lt": "<", "le": "≤"}
    found = []
    for item in metadata:
        for attribute, symbol in symbols.items():
            value = getattr(item, attribute, None)
            if value is not None:
                found.append(f"{symbol} {value}")
    return ", ".join(found)


def _docstring_example(doc: str) -> str:
    """The ``::`` literal block of a module docstring, as a YAML code block, and the prose after it."""
    before, _, rest = doc.partition("::\n")
    block: list[str] = []
    prose: list[str] = []
    for line in rest.splitlines():
        if not prose and (line.startswith("    ") or not line.strip()):
            block.append(line[4:])
        else:
            prose.append(line)
    del before
    text = "```yaml\n" + "\n".join(block).strip("\n") + "\n```\n\n" + "\n".join(prose).strip()
    return text.replace("``", "`")


# --- the metrics ------------------------------------------------------------------------------------------------

@page("reference/metrics.md")
def metrics_page() -> str:
    rows = _metric_families()
    lines = ["# Metrics", "",
             "`GET /metrics` on the server, in Prometheus' text format. Kueue's metrics keep Kueue's names and "
             "labels, so dashboards made for Kueue work; flexq's own start with `flexq_`. Counters count from the "
             "server's start. This page is generated from the server's collector when the docs are built.", ""]
    for title, prefix in (("Kueue's metrics", "kueue_"), ("flexq's own", "flexq_")):
        lines += [f"## {title}", "", "| metric | type | labels | meaning |", "|---|---|---|---|"]
        lines += [f"| `{name}` | {kind} | {', '.join(f'`{label}`' for label in labels)} | {_cell(doc)} |"
                  for name, kind, labels, doc in rows if name.startswith(prefix)]
        lines.append("")
    others = [name for name, *_ in rows if not name.startswith(("kueue_", "flexq_"))]
    if others:
        raise ValueError(f"docs/hooks.py: metrics of neither Kueue nor flexq: {others}")
    return "\n".join(lines) + "\n"


def empty_sample() -> Any:
    """A collector's ``Sample`` of nothing: no queues, no pools (every field empty, whatever fields it has)."""
    from flexq.controller import Sample

    return _empty(Sample)


def _empty(cls: type) -> Any:
    """An instance of dataclass ``cls`` with every field that has no default empty (a dataclass field: its own
    empty instance)."""
    hints = typing.get_type_hints(cls)
    empty: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        if field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING:
            continue
        kind = hints[field.name]
        if dataclasses.is_dataclass(kind) and isinstance(kind, type):
            empty[field.name] = _empty(kind)
        else:
            empty[field.name] = {dict: {}, list: [], tuple: ()}[typing.get_origin(kind) or kind]
    return cls(**empty)


def _metric_families() -> list[tuple[str, str, list[str], str]]:
    """(name as served, type, label names, help) of every family the collector yields, in its order."""
    from prometheus_client.registry import Collector

    from flexq.controller import Tally
    from flexq.server import prometheus

    sample = empty_sample()
    text = prometheus.render(Tally(), sample).decode()
    helps = dict(re.findall(r"^# HELP (\S+) (.*)$", text, re.M))
    kinds = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))
    collectors = [c for c in vars(prometheus).values()
                  if isinstance(c, type) and c.__module__ == prometheus.__name__ and Collector in c.__mro__]
    if len(collectors) != 1:
        raise ValueError(f"docs/hooks.py: expected one collector in flexq.server.prometheus, found {collectors}")
    rows = []
    for family in collectors[0](Tally(), sample).collect():  # type: ignore[call-arg]
        served = family.name + "_total" if family.type == "counter" else family.name
        if served not in helps:
            raise ValueError(f"docs/hooks.py: {served} is collected but not served")
        meaning = helps[served].replace("\\n", " ")  # a multi-line help, as the exposition format escapes it
        # flexq's text families name their labels; prometheus_client's keep them apart.
        labels = getattr(family, "labels", None) or getattr(family, "_labelnames", ())
        rows.append((served, kinds[served], list(labels), meaning))
    return rows


# --- Sphinx -----------------------------------------------------------------------------------------------------

STUB = "<!-- generated -->"
"""What a generated page's file holds in the source tree: the build puts the page's text in its place."""


def fill(app: Any, docname: str, source: list[str]) -> None:
    """Sphinx ``source-read``: a page listed in PAGES gets its generated text (its file must be the stub)."""
    del app
    render = PAGES.get(docname + ".md")
    if render is None:
        return
    if source[0].strip() != STUB:
        raise ValueError(f"docs/{docname}.md is generated: it must hold only {STUB!r}")
    source[0] = render()


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    for path, render in PAGES.items():
        target = out / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(render())
        print(target)
