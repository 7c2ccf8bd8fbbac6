"""A question's rendering and the fingerprint that pins a recorded answer to it."""

from typing import Any

from engine import Elicit
from examples.bookshop import Backorder


def test_a_question_asked_again_keeps_the_fingerprint_of_its_rendering() -> None:
    from engine.questions.kinds import ElicitURL
    from engine.questions.rendering import Rendered, fingerprint

    class Urgent(Elicit[Backorder]):
        """A subclass that renders more than its message and form: never remembered."""

        def __init__(self, message: str, level: int) -> None:
            super().__init__(message, Backorder)
            self.level = level

        def render(self) -> dict[str, Any]:
            return {**super().render(), "level": self.level}

    asked = [
        Elicit("Order anyway?", Backorder),
        Elicit("Order anyway?", Backorder),
        Elicit("Order anyway, really?", Backorder),
        ElicitURL("Sign in", "https://example.com/a"),
        ElicitURL("Sign in", "https://example.com/b"),
        Urgent("Order anyway?", 1),
        Urgent("Order anyway?", 2),
    ]
    for question in asked + asked:  # the second time from what is remembered
        assert Rendered.of(question).fingerprint == fingerprint(question.render())
    assert len({Rendered.of(q).fingerprint for q in asked}) == len(asked) - 1
