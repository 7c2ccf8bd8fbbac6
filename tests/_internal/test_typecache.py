"""``isinstance`` against model classes, answered once per exact type and still right past
the bound of what it remembers."""

from pydantic import BaseModel

from engine import AcceptedElicitation, DeclinedElicitation


def test_instance_tests_answer_as_isinstance_for_every_type_they_meet() -> None:
    from engine._internal import typecache as instances
    from engine._internal.typecache import instance_test

    is_outcome = instance_test(AcceptedElicitation, DeclinedElicitation)
    accepted = AcceptedElicitation[int](data=1)
    for _ in range(2):  # the second pass answers from what the first remembered
        assert is_outcome(accepted)
        assert is_outcome(DeclinedElicitation())
        assert not is_outcome("accept")
        assert not is_outcome({"action": "accept"})

    kinds = [type(f"Made{i}", (BaseModel,), {}) for i in range(instances.REMEMBERED_TYPES + 5)]
    is_model = instance_test(BaseModel)
    assert all(is_model(kind()) for kind in kinds)  # past the bound it forgets and stays right
    assert not is_model(3)
