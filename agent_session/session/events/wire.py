"""The base of every typed wire model: frozen pydantic, snake_case in Python, camelCase on the
wire, and ``to_json()`` giving the reference's keys in the reference's order (the field order of
the model), optional fields omitted when unset."""

from __future__ import annotations

from typing import Any, Self

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

__all__ = ["WireModel"]


class WireModel(BaseModel):
    """Frozen model with camelCase wire names. Unknown keys are kept (``extra="allow"``), so
    a typed view of data written by a newer producer loses nothing."""

    model_config = ConfigDict(
        frozen=True,
        alias_generator=to_camel,
        populate_by_name=True,
        extra="allow",
        serialize_by_alias=True,
    )

    def to_json(self) -> dict[str, Any]:
        """The wire dict: camelCase keys in reference order; unset optional fields omitted."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

    @classmethod
    def from_json(cls, value: Any) -> Self:
        """Parse a wire dict (camelCase keys); raises ``pydantic.ValidationError``."""
        return cls.model_validate(value)
