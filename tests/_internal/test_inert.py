"""Text made inert for a terminal: what is escaped, what is kept, and JSON that decodes back."""

from __future__ import annotations

import json
import unicodedata

from engine._internal.inert import inert, inert_json, inert_lines

HOSTILE = "a\x1b]0;t\x07\x1b[2J\x7f\x9b\u202e\u2066\u200e\u061c\u200b\u2028\u2029\ud800\U000e0041"


def acts(text: str) -> list[str]:
    return [c for c in text if unicodedata.category(c) in {"Cc", "Cf", "Cs", "Zl", "Zp"}]


def test_controls_format_and_separators_are_shown_as_their_codes() -> None:
    shown = inert(HOSTILE + "\r\n\t")
    assert acts(shown) == []
    assert shown == (
        "a\\x1b]0;t\\x07\\x1b[2J\\x7f\\x9b\\u202e\\u2066\\u200e\\u061c\\u200b\\u2028\\u2029"
        "\\ud800\\U000e0041\\r\\n\\t"
    )
    assert inert(shown) == shown  # twice is once: a backslash is left as it is


def test_other_text_is_shown_as_it_is() -> None:
    text = "Café, 東京, naïve \\x1b, 🙂 and a tab-free line"
    assert inert(text) == text


def test_a_block_keeps_its_lines_and_nothing_else() -> None:
    assert inert_lines("one\r\ntwo\tend\nthree\rx\x1b\n") == [
        "one",
        "two     end",
        "three\\rx\\x1b",
    ]
    assert inert_lines("") == []
    assert inert_lines("\n") == [""]


def test_json_escapes_what_acts_and_decodes_to_the_same_value() -> None:
    value = {"sub": HOSTILE + "\n", "name": "Café 🙂", HOSTILE: [1, None]}
    for indent in (None, 2):
        text = inert_json(value, indent=indent)
        assert acts(text.replace("\n", "")) == []
        assert json.loads(text) == value
    assert '"Café 🙂"' in inert_json(value)
