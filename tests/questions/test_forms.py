"""The form a pydantic model is shown to the user as: the restricted JSON schema of elicitation."""

from typing import Literal

import pytest
from pydantic import BaseModel, Field

from engine.questions.forms import elicitation_schema


class Reader(BaseModel):
    name: str = Field(description="Your name")
    age: int | None = Field(default=None, description="Your age (optional)")
    newsletter: bool | None = Field(default=False, description="Subscribe?")
    genre: Literal["fiction", "poetry"] = "fiction"


def test_a_form_is_titled_and_optional_fields_are_shown_as_their_type() -> None:
    assert elicitation_schema(Reader) == {
        "properties": {
            "name": {"description": "Your name", "title": "Name", "type": "string"},
            "age": {"description": "Your age (optional)", "title": "Age", "type": "integer"},
            "newsletter": {
                "default": False,
                "description": "Subscribe?",
                "title": "Newsletter",
                "type": "boolean",
            },
            "genre": {
                "default": "fiction",
                "enum": ["fiction", "poetry"],
                "title": "Genre",
                "type": "string",
            },
        },
        "required": ["name"],
        "title": "Reader",
        "type": "object",
    }


class Address(BaseModel):
    city: str


class Applicant(BaseModel):
    name: str
    address: Address


class Numbers(BaseModel):
    lucky: list[int] | None = None


class Either(BaseModel):
    value: int | str


@pytest.mark.parametrize(
    ("model", "field"), [(Applicant, "address"), (Numbers, "lucky"), (Either, "value")]
)
def test_a_field_a_form_cannot_show_is_refused_by_name(model: type[BaseModel], field: str) -> None:
    with pytest.raises(TypeError, match=f"Field '{field}' of {model.__name__}"):
        elicitation_schema(model)
