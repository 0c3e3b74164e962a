"""The mechanism table: an analytic example from the lesson's data file, not from a run.

Reads lesson_code/figures/<id>-mechanism.json: `{"title", "alt", "table": {"headers",
"rows"}}`, text cells; `alt` becomes <desc>, so it says in words all the table shows.
Data rows: the table's rows, keyed by its (distinct) headers.
"""
from scripts.figures.svg import figure_style, new_figure, not_xml, svg_text
from scripts.figures.variants import NARROW_IN, STATIC

# The lesson's file is checked like any input: a 3,000-row table took 86 s to draw.
MAX_ROWS, MAX_COLUMNS, MAX_CELL, MAX_PROSE = 20, 8, 60, 2000


def table_of(diagram):
    """The diagram's table; ValueError naming the field for any other shape."""
    if not isinstance(diagram, dict):
        raise ValueError("the file must hold one JSON object")
    for key in ("title", "alt"):
        if not isinstance(diagram.get(key), str) or not 0 < len(diagram[key]) <= MAX_PROSE:
            raise ValueError(f"`{key}` must be text of 1 to {MAX_PROSE} characters")
        if character := not_xml(diagram[key]):
            raise ValueError(f"`{key}` holds {character}, a character no SVG can hold; "
                             f"remove it")
    table = diagram.get("table")
    headers = table.get("headers") if isinstance(table, dict) else None
    rows = table.get("rows") if isinstance(table, dict) else None
    if not isinstance(headers, list) or not 1 <= len(headers) <= MAX_COLUMNS \
            or not isinstance(rows, list) or not 1 <= len(rows) <= MAX_ROWS \
            or not all(isinstance(row, list) and len(row) == len(headers) for row in rows):
        raise ValueError(f"`table` must have 1 to {MAX_COLUMNS} `headers` and 1 to {MAX_ROWS} "
                         f"`rows`, each row one cell per header")
    for cell in [*headers, *(cell for row in rows for cell in row)]:
        if not isinstance(cell, str) or len(cell) > MAX_CELL or not_xml(cell):
            raise ValueError(f"every cell of `table` must be text of at most {MAX_CELL} "
                             f"characters that an SVG can hold, not {cell!r:.40}")
    return table


def rows(diagram):
    table = table_of(diagram)
    if len(set(table["headers"])) < len(table["headers"]):
        raise ValueError("`table` must have headers that differ: they name its data's columns")
    return [dict(zip(table["headers"], row)) for row in table["rows"]]


def render(diagram, variant=STATIC):
    table = table_of(diagram)
    palette = variant.palette
    width, font = (NARROW_IN, 8) if variant.narrow else (6.4, 11)
    row_in = 0.36 if variant.narrow else 0.42
    with figure_style(palette=palette):
        fig, ax = new_figure(figsize=(width, row_in * (len(table["rows"]) + 1)))
        ax.axis("off")
        # The table fills the axes, so no band of empty canvas is left above or below it.
        cells = ax.table(cellText=table["rows"], colLabels=table["headers"],
                         bbox=[0, 0, 1, 1], cellLoc="center", colLoc="center")
        cells.auto_set_font_size(False)
        cells.set_fontsize(font)
        for (row, col), cell in cells.get_celld().items():
            cell.get_text().set_parse_math(False)  # a `$` is a dollar sign, never mathtext
            cell.set_edgecolor(palette.faint)
            cell.set_facecolor(palette.paper)
            cell.get_text().set_color(palette.ink)
            if row == 0 or col == 0:
                cell.set_text_props(fontweight="bold")
                cell.set_facecolor(palette.header)
        fig.tight_layout()
        return svg_text(fig, diagram["title"], diagram["alt"])
