"""Questions rebuilt from a ``once`` resolver's checkpoint."""

import pytest

from engine.errors import InvalidRequestState
from engine.questions.kinds import ListRoots
from engine.questions.restore import restore_question


def test_a_roots_question_is_rebuilt_as_one() -> None:
    question = restore_question("roots", {}, None)
    assert question.kind == ListRoots.kind
    assert question.render() == {}


def test_a_kind_this_release_does_not_know_is_refused_not_guessed() -> None:
    with pytest.raises(InvalidRequestState) as refused:
        restore_question("survey", {"message": "How was it?"}, None)
    assert "unknown kind 'survey'" in refused.value.reason
    assert refused.value.message == "Invalid or expired requestState"
