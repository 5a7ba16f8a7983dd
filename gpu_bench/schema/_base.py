"""The pydantic base shared by every FlashInfer-Bench model: strict fields, lossless JSON."""

from __future__ import annotations

from typing import Annotated, Any, Self

from pydantic import BaseModel, ConfigDict, StringConstraints

NonEmptyStr = Annotated[str, StringConstraints(min_length=1)]


class Model(BaseModel):
    """A strict model: unknown fields are errors, and JSON keeps exactly the fields that were given.

    ``to_json_dict`` drops only fields that were never set, so a file read and written again is
    unchanged, while a model built in code keeps every field passed to it.
    """

    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="strings", validate_default=True)

    def to_json_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_unset=True)

    def to_json(self) -> str:
        return self.model_dump_json(exclude_unset=True)

    @classmethod
    def from_json_dict(cls, data: Any) -> Self:
        return cls.model_validate(data)
