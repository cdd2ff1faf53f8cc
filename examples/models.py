"""Example Pydantic models for ``make generate`` and the README."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class Address(BaseModel):
    city: str = Field(max_length=40)
    country: str = Field(max_length=40)


class Person(BaseModel):
    name: str = Field(min_length=1, max_length=40)
    age: int = Field(ge=0, le=120)
    occupation: Literal["engineer", "doctor", "teacher", "artist", "other"]
    address: Address
