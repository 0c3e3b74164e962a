"""The data behind a figure, as CSV and JSON beside its SVG: the rows its renderer's
`rows(data)` returns, read by the helpers the drawing uses, so the data a reader downloads
is the picture's. Imports no renderer until a table is made.
"""
import csv
import importlib
import io
import json
import math
from dataclasses import dataclass

FORMATS = (".csv", ".json")


def data_path(figure_path, ending):
    return figure_path.removesuffix(".svg") + ending


def cell(value):
    """A row's value as JSON and CSV both hold it: text, a number or None."""
    value = value.item() if hasattr(value, "item") else value
    if value is None or isinstance(value, str) or (isinstance(value, int)
                                                   and not isinstance(value, bool)):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    raise ValueError(f"a data row holds {value!r:.40}; rows hold text, numbers and None")


def table(rows):
    """(columns, rows as lists): the columns in the order the rows first name them."""
    if not isinstance(rows, list) or not rows or not all(isinstance(r, dict) for r in rows):
        raise ValueError("rows() must return a non-empty list of dicts")
    columns = list(dict.fromkeys(name for row in rows for name in row))
    return columns, [[cell(row.get(name)) for name in columns] for row in rows]


@dataclass(frozen=True)
class FigureDataKind:
    """How one data file of a figure is made: its renderer's rows, in one format."""
    figure: object  # the FigureKind (scripts/figures/__init__.py)
    ending: str  # ".csv" or ".json"
    about: tuple  # (key, value) pairs the JSON opens with: the figure and its sources

    @property
    def renderer(self):
        return self.figure.renderer

    def rows(self, data, overlay=None):
        module = importlib.import_module(self.figure.module)
        if not callable(getattr(module, "rows", None)):
            raise ValueError(f"{self.figure.module_path()} has no rows(data): every figure's "
                             f"data (its CSV and JSON) is what that function returns")
        found = module.rows(data, **self.figure.options) if self.figure.overlay is None \
            else module.rows(data, overlay)
        return table(found)

    def render(self, data, overlay=None):
        columns, rows = self.rows(data, overlay)
        if self.ending == ".csv":
            out = io.StringIO()
            writer = csv.writer(out, lineterminator="\n")
            writer.writerow(columns)
            # repr keeps every digit of a float, so a CSV cell is the JSON's number exactly.
            writer.writerows([["" if v is None else repr(v) if isinstance(v, float) else v
                               for v in row] for row in rows])
            return out.getvalue()
        # `about` (where the rows come from; drawn without the overlay, it is not named),
        # the columns, then one row a line, for diffs.
        about = {key: value for key, value in self.about
                 if overlay is not None or key != "overlay"}
        fields = [f" {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}"
                  for k, v in {**about, "columns": columns}.items()]
        lines = ",\n".join(f"  {json.dumps(row, ensure_ascii=False)}" for row in rows)
        return "{\n" + ",\n".join([*fields, f' "rows": [\n{lines}\n ]']) + "\n}\n"
