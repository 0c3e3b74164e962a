"""JSON Schema checks: a compiled validator decides, jsonschema words the refusal.

jsonschema-rs validates the 0.93 MB sweep in about 3 ms where jsonschema takes 300, and
the build validates every recording. Only a value it refuses is walked again by
jsonschema, whose best_match picks the error a person reads, so every error line stays
as it was. Nothing is fetched: a `$ref` reaches only the schemas handed in. Every schema
file (the recordings', a lesson's data schema, the registry's) is read and compiled here.
"""
import errno
import json
import os
import stat
from collections import deque
from dataclasses import dataclass
from functools import lru_cache
from types import SimpleNamespace

import jsonschema_rs

from scripts import display
from scripts.plumbing.checkout import no_link


class SchemaError(Exception):
    """A schema file that cannot be used: `what` happened, and the `fix`, for the caller's
    own error (a recording's, the registry's) to say in its one line."""

    def __init__(self, what, fix=None):
        super().__init__(f"{what}; run `{fix}`" if fix else what)
        self.what, self.fix = what, fix


def unreadable(path, why):
    return SchemaError(f"{display(path)}: the schema cannot be read ({why})",
                       f"git checkout -- {display(path)}")


# The largest schema here is 30 KB: a bound, not a limit anyone meets.
MAX_SCHEMA_BYTES = 2**20


def schema_file(path):
    """The bytes of the schema file at `path`, which may be no link and no device."""
    try:
        with open(path, "rb", opener=no_link) as file:
            if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):  # a device, a pipe
                raise unreadable(path, "not a regular file")
            data = file.read(MAX_SCHEMA_BYTES + 1)
    except FileNotFoundError:
        raise unreadable(path, "missing") from None
    except OSError as error:
        raise unreadable(path, "a symbolic link" if error.errno == errno.ELOOP
                         else error.strerror) from None
    if len(data) > MAX_SCHEMA_BYTES:
        raise unreadable(path, f"larger than {MAX_SCHEMA_BYTES // 2**20} MiB")
    return data


@lru_cache(maxsize=16)
def compiled(path, data, shared=None, part=None):
    """The Schema of a schema file's bytes, built once per text. `shared`: (the path, the
    bytes) of the shared schema, whose $defs it may $ref; `part`: only that `$defs` entry
    (None when there is none)."""
    def parsed(where, text):  # bytes the bounded reader above read
        try:
            return json.loads(text)
        except RecursionError:
            raise unreadable(where, "not valid JSON (nested deeper than a JSON reader "
                                    "goes)") from None
        except ValueError as error:  # JSONDecodeError and UnicodeDecodeError
            raise unreadable(where, f"not valid JSON ({str(error)[:160]})") from None

    schema = parsed(path, data)
    common = parsed(*shared) if shared is not None else None
    pairs = ((common.get("$id", "recordings/schema.json"), common),) if common else ()
    if part is not None:
        compiled(path, data, shared)  # the whole schema first: a broken one is named so
        if part not in schema.get("$defs", {}):
            return None
        schema = {"$schema": schema.get("$schema"), "$defs": schema["$defs"],
                  "$ref": f"#/$defs/{part}"}
    if not jsonschema_rs.meta.is_valid(schema):
        import jsonschema

        try:
            jsonschema.Draft202012Validator.check_schema(schema)
        except jsonschema.SchemaError as error:
            where = "/".join(map(str, error.absolute_path)) or "(top level)"
            raise not_a_schema(path, f"at {where}: {error.message[:120]}") from None
    try:
        return Schema(schema, pairs, jsonschema_rs.Draft202012Validator(
            schema, registry=jsonschema_rs.Registry(list(pairs)), offline=True))
    except (jsonschema_rs.ValidationError, jsonschema_rs.ReferencingError, ValueError) as error:
        raise not_a_schema(path, str(error).splitlines()[0][:160]) from None


def not_a_schema(path, why):
    return SchemaError(f"{display(path)}: not a JSON Schema ({why}); fix it, or "
                       f"`git checkout -- {display(path)}`")


@dataclass(frozen=True, eq=False)  # one per schema text: equal only to itself
class Schema:
    schema: dict
    shared: tuple  # (uri, schema) pairs it may $ref
    fast: object  # jsonschema-rs's compiled validator

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
