"""An answer is kept as its question validated it: what a client adds beside it is dropped, and
the kept form parses to the same outcome."""

from pydantic import BaseModel

from engine.questions.kinds import Elicit, ElicitURL, ListRoots, Sample

PADDING = "x" * 10_000


class Note(BaseModel):
    note: str


def test_a_form_answer_keeps_its_action_and_fields_only() -> None:
    question = Elicit("Note?", Note)
    answer = {"action": "accept", "content": {"note": "hi", "padding": PADDING}, "pad": PADDING}
    kept = question.kept(question.parse(answer))
    assert kept == {"action": "accept", "content": {"note": "hi"}}
    assert question.parse(kept) == question.parse(answer)
    assert question.kept(question.parse({"action": "decline", "pad": PADDING})) == {
        "action": "decline"
    }


def test_a_url_answer_keeps_its_action_only() -> None:
    question = ElicitURL("Sign in", "https://example.test/")
    assert question.kept(question.parse({"action": "accept", "content": {"p": PADDING}})) == {
        "action": "accept"
    }


def test_sampling_and_roots_answers_keep_their_declared_fields_only() -> None:
    sample = Sample([], max_tokens=10)
    answer = {
        "role": "assistant",
        "content": {"type": "text", "text": "hello", "padding": PADDING},
        "model": "m",
        "padding": PADDING,
    }
    outcome = sample.parse(answer)
    assert PADDING not in str(outcome.model_dump())  # the handler does not see it either
    kept = sample.kept(outcome)
    assert kept == {"role": "assistant", "content": {"type": "text", "text": "hello"}, "model": "m"}
    assert sample.parse(kept) == outcome
    roots = ListRoots()
    kept = roots.kept(roots.parse({"roots": [{"uri": "file:///a", "pad": PADDING}], "p": 1}))
    assert kept == {"roots": [{"uri": "file:///a"}]}
