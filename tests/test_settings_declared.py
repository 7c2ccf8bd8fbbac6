"""Each setting is declared once, as a field of a group in ``engine.settings``: the keywords
``MCPServer(...)`` takes for type checkers (``ServerOptions``) and the listing in
docs/settings.md are checked against those declarations, so neither can drift from them."""

from __future__ import annotations

import ast
import inspect
import textwrap
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

import pytest
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from engine._internal.setting_groups import (
    CODE_ONLY,
    Allowed,
    SettingGroup,
    allowed,
    keyword_of,
    settings_of,
    variable_of,
)
from engine.settings import SERVER_OPTIONS, SETTING_GROUPS, ServerOptions, Settings

DOC = Path(__file__).resolve().parent.parent / "docs" / "settings.md"
BEGIN, END = "<!-- settings table: begin -->", "<!-- settings table: end -->"


def members(annotation: Any) -> list[Any]:
    """The types of a union (``None`` aside), or the one type."""
    if get_origin(annotation) in (Union, types.UnionType):
        return [member for member in get_args(annotation) if member is not type(None)]
    return [annotation]


def takes(typed: Any, declared: Any) -> bool:
    """Whether a keyword typed ``typed`` admits what the setting ``declared`` holds."""
    if typed is Any:
        return True
    if get_origin(declared) is Literal:
        return all(any(isinstance(c, t) for t in members(typed)) for c in get_args(declared))
    for member in members(typed):
        if member == declared:
            return True
        origin, declared_origin = get_origin(member), get_origin(declared)
        if origin and declared_origin and issubclass(declared_origin, origin):
            return True
    return False


def test_server_options_are_the_declared_keywords() -> None:
    assert set(ServerOptions.__optional_keys__) == SERVER_OPTIONS


@pytest.mark.parametrize("group", SETTING_GROUPS, ids=lambda group: group.__name__)
def test_each_keyword_is_typed_as_its_setting(group: type[SettingGroup]) -> None:
    typed = typing.get_type_hints(ServerOptions)
    for keyword, field in settings_of(group):
        if keyword_of(field) is None:
            continue
        assert all(takes(typed[keyword], m) for m in members(field.annotation)), (
            f"ServerOptions[{keyword!r}] is {typed[keyword]}; the setting holds {field.annotation}"
        )


def test_each_setting_not_given_takes_its_declared_default() -> None:
    settings = Settings.build(name="Bookshop", environ={})
    built = {type(group): group for group in vars(settings).values()} | {Settings: settings}
    built[type(settings.serve.connections)] = settings.serve.connections
    for group in SETTING_GROUPS:
        for _, field in settings_of(group):
            name = next(n for n, f in group.model_fields.items() if f is field)
            if field.default not in (None, PydanticUndefined):  # else derived: see its doc
                assert getattr(built[group], name) == field.default, (group.__name__, name)


def docstrings(group: type[SettingGroup]) -> dict[str, str]:
    """Each field's docstring, the string written under it, in one line."""
    [cls] = ast.parse(textwrap.dedent(inspect.getsource(group))).body
    assert isinstance(cls, ast.ClassDef)
    found = {}
    for node, after in zip(cls.body, cls.body[1:], strict=False):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            found[node.target.id] = " ".join(after.value.value.split())
    return found


def default_of(field: FieldInfo) -> str:
    if field.is_required() or field.default_factory is not None or field.default is None:
        return "see meaning"
    if isinstance(field.default, int | float) and not isinstance(field.default, bool):
        return (
            f"`{field.default:,}`".replace(",", "_")
            if field.default >= 10_000
            else (f"`{field.default!r}`")
        )
    return f"`{field.default!r}`"


def rows() -> Iterator[str]:
    for group in SETTING_GROUPS:
        docs = docstrings(group)
        names = {id(f): n for n, f in group.model_fields.items()}
        for keyword, field in settings_of(group):
            variable = variable_of(field)
            kind = members(field.annotation)[0]
            takes_text = (
                allowed(field, environment=variable is not None and CODE_ONLY not in field.metadata)
                if kind in (int, float, bool, str)
                or get_origin(kind) is Literal
                or any(isinstance(item, Allowed) for item in field.metadata)
                else "an object"
            )
            meaning = docs[names[id(field)]].replace("|", "\\|")
            yield (
                f"| {f'`{keyword}`' if keyword_of(field) else ''} "
                f"| {f'`{variable}`' if variable else ''} | {default_of(field)} | {takes_text} "
                f"| {meaning} |"
            )


def table() -> str:
    header = "| keyword | variable | default | takes | meaning |\n|---|---|---|---|---|"
    return "\n".join([BEGIN, header, *rows(), END])


def test_docs_list_every_setting_as_declared() -> None:
    text = DOC.read_text(encoding="utf-8")
    start, end = text.index(BEGIN), text.index(END) + len(END)
    expected = table()
    assert text[start:end] == expected, (
        f"{DOC.name} is not the settings as declared in engine/settings.py: replace its table "
        f"with\n{expected}"
    )
