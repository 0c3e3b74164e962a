"""JSON Schema checks: a compiled validator decides, jsonschema words the refusal.

jsonschema-rs validates the 0.93 MB sweep in about 3 ms where jsonschema takes 300, and
the build validates every recording. Only a value it refuses is walked again by
jsonschema, whose best_match picks the error a person reads, so every error line stays
as it was. Nothing is fetched: a `$ref` reaches only the schemas handed in.
"""
from collections import deque
from dataclasses import dataclass
from types import SimpleNamespace

import jsonschema_rs


class NotASchema(Exception):
    """A schema that is not one; str() says where in it, in a few words."""


@dataclass(frozen=True, eq=False)  # one per schema text: equal only to itself
class Schema:
    schema: dict
    shared: tuple = ()  # (uri, schema) pairs it may $ref

    def __post_init__(self):
        if not jsonschema_rs.meta.is_valid(self.schema):
            import jsonschema

            try:
                jsonschema.Draft202012Validator.check_schema(self.schema)
            except jsonschema.SchemaError as error:
                where = "/".join(map(str, error.absolute_path)) or "(top level)"
                raise NotASchema(f"at {where}: {error.message[:120]}") from None
        try:
            fast = jsonschema_rs.Draft202012Validator(
                self.schema, registry=jsonschema_rs.Registry(list(self.shared)), offline=True)
        except (jsonschema_rs.ValidationError, jsonschema_rs.ReferencingError,
                ValueError) as error:
            raise NotASchema(str(error).splitlines()[0][:160]) from None
        object.__setattr__(self, "fast", fast)

    def error(self, value):
        """None when `value` fits; else the error a person reads, with `absolute_path`,
        `message`, `validator` and `validator_value` as jsonschema's errors have them."""
        try:
            if self.fast.is_valid(value):
                return None
            decided = True
        except ValueError:  # a value JSON cannot hold (a key that is not a string)
            decided = False  # jsonschema decides
        import jsonschema
        from jsonschema.exceptions import best_match
        from referencing import Registry, Resource

        registry = Registry().with_resources(
            (uri, Resource.from_contents(schema)) for uri, schema in self.shared)
        found = best_match(jsonschema.Draft202012Validator(
            self.schema, registry=registry).iter_errors(value))
        if found is not None or not decided:
            return found
        # Where the two read a pattern differently (`$` before a final newline), the
        # compiled validator's refusal stands, in its own words.
        first = next(iter(self.fast.iter_errors(value)))
        return SimpleNamespace(absolute_path=deque(first.instance_path), message=first.message,
                               validator=first.kind.name, validator_value=None)
