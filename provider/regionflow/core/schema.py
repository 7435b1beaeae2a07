"""Declared input models: each input kind (a job spec, a host spec, the ``[regionflow]`` options)
states its fields once, as `Field`s of a `Model`; checking a value and printing its JSON Schema
(``regionflow schema``) both read that declaration, so a rule is written in one place.

A check raises `SpecError` with one line that names where the value sits (a JSON path such as
``vertices[2].parallelism``), the value, the rule and the fix; an unknown key gets a "did you mean"
when a declared one is close. Numbers must be finite (JSON's ``NaN``/``Infinity`` are refused) and
within the declared range; booleans are never numbers.

Pure standard library, like the rest of ``core/``.
"""
from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import SpecError

JSON = Any


@dataclass(frozen=True)
class Field:
    """One key of a `Model`.

    `kind` is one of ``"string"``, ``"integer"``, ``"number"``, ``"boolean"``, ``"object"``,
    ``"array"``, ``"null"``, or a `Model` (a nested object), or a tuple of those (any of them). `items` is the
    kind of an array's elements; `values` the kind of an object's values (free keys); `above` makes the
    minimum exclusive. `check` is an
    extra rule on the value, returning an error text (what is wrong and the fix) or None.
    """

    name: str
    kind: str | Model | tuple[str | Model, ...]
    doc: str
    required: bool = False
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()
    items: str | Model | None = None
    values: str | None = None
    above: bool = False  # the minimum itself is not allowed (e.g. cores of a host: more than 0)
    non_empty: bool = False
    check: Callable[[Any], str | None] | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Model:
    """A JSON object with declared keys; other keys are refused, or, with `extra`, each checked as that
    field (e.g. a vertex's resources: declared cpu and memory sizes, and extended ones such as gpu)."""

    name: str
    doc: str
    fields: tuple[Field, ...]
    # rules over several keys, each returning an error text (what is wrong and the fix) or None; checked
    # once every key passed its own rules
    rules: tuple[Callable[[Mapping[str, Any]], str | None], ...] = field(default=(), compare=False)
    extra: Field | None = None  # how an undeclared key's value is checked; None: such a key is refused

    def field(self, name: str) -> Field:
        return next(f for f in self.fields if f.name == name)

    def validate(self, value: JSON, path: str = "") -> Mapping[str, Any]:
        """Return `value` (a mapping) once every declared rule holds; raise `SpecError` otherwise."""
        where = path or self.name
        if not isinstance(value, Mapping):
            raise SpecError(f"{where} must be an object ({self.doc}), got {_show(value)}")
        names = {f.name for f in self.fields}
        for key in value:
            if isinstance(key, str) and key not in names and self.extra is not None:
                _check_value(self.extra, value[key], f"{path}.{key}" if path else key)
            elif not isinstance(key, str) or key not in names:
                raise SpecError(f"{where} has unknown key {key!r}{did_you_mean(key, [f.name for f in self.fields])}; "
                                f"allowed: {', '.join(f.name for f in self.fields)}")
        for declared in self.fields:
            if declared.name not in value:
                if declared.required:
                    raise SpecError(f"{where} needs {declared.name!r} ({declared.doc})")
                continue
            _check_value(declared, value[declared.name], f"{path}.{declared.name}" if path else declared.name)
        for rule in self.rules:
            problem = rule(value)
            if problem:
                raise SpecError(f"{where}: {problem}")
        return value

    def json_schema(self) -> dict[str, Any]:
        """This model as a JSON Schema (draft 2020-12) object."""
        return {
            "type": "object",
            "title": self.name,
            "description": self.doc,
            "properties": {f.name: _field_schema(f) for f in self.fields},
            "required": [f.name for f in self.fields if f.required],
            "additionalProperties": False if self.extra is None else _field_schema(self.extra),
        }


def did_you_mean(word: Any, known: Sequence[str]) -> str:
    """`` (did you mean 'x'?)`` when a known name is close to `word`, else ``""``."""
    if not isinstance(word, str):
        return ""
    close = difflib.get_close_matches(word, list(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _kinds(kind: str | Model | tuple[str | Model, ...]) -> tuple[str | Model, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _kind_name(kind: str | Model) -> str:
    return "object" if isinstance(kind, Model) else kind


def _matches(kind: str | Model, value: Any) -> bool:
    if isinstance(kind, Model):
        return isinstance(value, Mapping)
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "object":
        return isinstance(value, Mapping)
    if kind == "array":
        return isinstance(value, list)
    if kind == "null":
        return value is None
    raise ValueError(f"undeclared kind {kind!r}")


def _check_value(declared: Field, value: Any, path: str) -> None:
    kinds = _kinds(declared.kind)
    kind = next((k for k in kinds if _matches(k, value)), None)
    if kind is None:
        wanted = " or ".join(_kind_name(k) for k in kinds)
        raise SpecError(f"{path} must be {_article(wanted)} ({declared.doc}), got {_show(value)}")
    if isinstance(kind, Model):
        kind.validate(value, path)
        return
    if kind in ("integer", "number"):
        _check_number(declared, value, path)
    if kind == "string":
        if declared.non_empty and not value.strip():
            raise SpecError(f"{path} is empty; give {declared.doc}")
        if declared.choices and value.strip().lower() not in declared.choices:
            raise SpecError(f"{path} is {value!r}{did_you_mean(value.strip().lower(), declared.choices)}; "
                            f"use one of {', '.join(declared.choices)}")
    if kind == "array":
        if declared.non_empty and not value:
            raise SpecError(f"{path} is empty; give {declared.doc}")
        if declared.items is not None:
            element = Field(declared.name, declared.items, declared.doc, minimum=declared.minimum,
                            maximum=declared.maximum, above=declared.above, non_empty=True)
            for index, item in enumerate(value):
                _check_value(element, item, f"{path}[{index}]")
    if kind == "object" and declared.values is not None:
        element = Field(declared.name, declared.values, declared.doc, minimum=declared.minimum,
                        maximum=declared.maximum, above=declared.above)
        for key, item in value.items():
            _check_value(element, item, f"{path}.{key}")
    if declared.check is not None:
        problem = declared.check(value)
        if problem:
            raise SpecError(f"{path} = {_show(value)}: {problem}")


def _check_number(declared: Field, value: float, path: str) -> None:
    if not math.isfinite(value):
        raise SpecError(f"{path} is {value}; it must be a finite number ({declared.doc})")
    if declared.minimum is not None and declared.above and value <= declared.minimum:
        raise SpecError(f"{path} is {value}; it must be greater than {_number(declared.minimum)} ({declared.doc})")
    if declared.minimum is not None and value < declared.minimum:
        raise SpecError(f"{path} is {value}; it must be at least {_number(declared.minimum)} ({declared.doc})")
    if declared.maximum is not None and value > declared.maximum:
        raise SpecError(f"{path} is {value}; it must be at most {_number(declared.maximum)} ({declared.doc})")


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _article(kinds: str) -> str:
    return ("an " if kinds[0] in "aeiou" else "a ") + kinds


def _field_schema(declared: Field) -> dict[str, Any]:
    options = [_kind_schema(declared, kind) for kind in _kinds(declared.kind)]
    schema: dict[str, Any] = options[0] if len(options) == 1 else {"anyOf": options}
    schema["description"] = declared.doc
    return schema


def _kind_schema(declared: Field, kind: str | Model) -> dict[str, Any]:
    if isinstance(kind, Model):
        return kind.json_schema()
    schema: dict[str, Any] = {"type": kind}
    if kind in ("integer", "number"):
        if declared.minimum is not None:
            schema["exclusiveMinimum" if declared.above else "minimum"] = declared.minimum
        if declared.maximum is not None:
            schema["maximum"] = declared.maximum
    if kind == "string":
        if declared.choices:
            schema["enum"] = list(declared.choices)
        if declared.non_empty:
            schema["minLength"] = 1
    if kind == "array" and declared.non_empty:
        schema["minItems"] = 1
    if kind == "array" and declared.items is not None:
        item = Field(declared.name, declared.items, declared.doc, minimum=declared.minimum, maximum=declared.maximum,
                     above=declared.above, non_empty=True)
        schema["items"] = _field_schema(item)
    if kind == "object" and declared.values is not None:
        value = Field(declared.name, declared.values, declared.doc, minimum=declared.minimum,
                      maximum=declared.maximum, above=declared.above)
        schema["additionalProperties"] = _field_schema(value)
    return schema


__all__ = ["Field", "Model", "did_you_mean"]
