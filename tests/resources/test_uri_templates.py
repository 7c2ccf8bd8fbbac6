"""URI templates (RFC 6570) read backwards: which values a URI gives each variable."""

from __future__ import annotations

import re

import pytest

from engine.resources.uri_template import InvalidUriTemplate, UriTemplate


@pytest.mark.parametrize(
    ("template", "uri", "values"),
    [
        ("books://{isbn}", "books://978-0441172719", {"isbn": "978-0441172719"}),
        ("books://{isbn}", "books://a%20b", {"isbn": "a b"}),
        ("books://{isbn}", "books://a/b", None),
        ("data://v1.0/{id}", "data://v1X0/42", None),
        ("manuals://{+path}", "manuals://printing/setup.md", {"path": "printing/setup.md"}),
        ("manuals://{+path}{.ext}", "manuals://a/b.md", {"path": "a/b", "ext": "md"}),
        ("api://{+path}/{id}", "api://a/b/c", {"path": "a/b", "id": "c"}),
        ("api://{+path}/{id}", "api://foo", None),
        ("{key}-{+rest}", "x-y-z", {"key": "x", "rest": "y-z"}),
        ("prefix-{id}", "prefix-prefix-1", {"id": "prefix-1"}),
        (
            "shelves://browse{/path*}",
            "shelves://browse/fiction/sci-fi",
            {"path": ["fiction", "sci-fi"]},
        ),
        ("shelves://browse{/path*}", "shelves://browse", {"path": []}),
        ("m{;id}", "m;id=7", {"id": "7"}),
        ("m{;id}", "m;id", {"id": ""}),
        ("doc://{name}{#section}", "doc://a#intro/b", {"name": "a", "section": "intro/b"}),
    ],
)
def test_a_uri_gives_each_variable_its_decoded_value(
    template: str, uri: str, values: dict[str, object] | None
) -> None:
    assert UriTemplate.parse(template).match(uri) == values


def test_query_variables_may_be_missing_reordered_or_joined_by_others() -> None:
    logs = UriTemplate.parse("logs://{service}{?since,level}")
    assert logs.query_variable_names == {"since", "level"}
    assert logs.match("logs://api") == {"service": "api"}
    assert logs.match("logs://api?level=error&since=5m&utm=x") == {
        "service": "api",
        "since": "5m",
        "level": "error",
    }
    assert logs.match("logs://api?level=a+b&level=second") == {"service": "api", "level": "a+b"}


def test_an_encoded_name_does_not_stand_in_for_a_query_variable() -> None:
    search = UriTemplate.parse("s://{where}{?token}")
    assert search.match("s://x?%74oken=evil") == {"where": "x"}


def test_a_uri_longer_than_the_limit_matches_nothing() -> None:
    assert UriTemplate.parse("big://{+rest}").match("big://" + "a" * 70_000) is None


@pytest.mark.parametrize(
    ("template", "says"),
    [
        ("file://{name", "Unclosed expression at position 7"),
        ("x{}", "Empty expression"),
        ("x{+}", "Empty expression"),
        ("x{name:3}", "Prefix modifier"),
        ("x{na me}", "Invalid variable name"),
        ("x{a*}", "explode modifier"),
        ("x{?a*}", "explode modifier"),
        ("x{a}{b}", "'a' and 'b' have nothing between them"),
        ("manuals://{+path}{ext}", "'path' and 'ext' have nothing between them"),
        ("copy://{+from}/to/{+to}", "More than one variable may span segments"),
        ("x{a}/{a}", "'a' appears more than once"),
        ("x{?a}{?b}", "More than one {?...} expression"),
    ],
)
def test_a_template_that_cannot_be_matched_is_refused_saying_why(template: str, says: str) -> None:
    with pytest.raises(InvalidUriTemplate, match=re.escape(says)) as refused:
        UriTemplate.parse(template)
    assert isinstance(refused.value, ValueError)
    assert refused.value.template == template


def test_the_position_of_a_fault_is_given_when_there_is_one() -> None:
    with pytest.raises(InvalidUriTemplate) as refused:
        UriTemplate.parse("file://docs/{name")
    assert refused.value.position == 12


def test_a_template_is_its_text() -> None:
    template = UriTemplate.parse("manuals://{+path}")
    assert str(template) == "manuals://{+path}"
    assert template == UriTemplate.parse("manuals://{+path}")
    assert template.variable_names == ["path"]
    assert UriTemplate.is_template("a://{b}") and not UriTemplate.is_template("a://b")
