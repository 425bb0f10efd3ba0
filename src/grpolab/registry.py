"""A named registry of variants (advantage estimators, loss aggregations), as verl's register_adv_est."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

F = TypeVar("F", bound=Callable)


class Registry(dict[str, F], Generic[F]):
    """name -> function; `register(name)` is a decorator, `lookup(name)` names the valid choices on a miss."""

    def __init__(self, kind: str):
        super().__init__()
        self.kind = kind

    def register(self, name: str) -> Callable[[F], F]:
        def wrap(fn: F) -> F:
            if name in self:
                raise ValueError(f"{self.kind} {name!r} is already registered")
            self[name] = fn
            return fn

        return wrap

    def lookup(self, name: str) -> F:
        try:
            return self[name]
        except KeyError:
            raise ValueError(f"unknown {self.kind} {name!r}; valid: {', '.join(sorted(self))}") from None
