"""The mechanism table: an analytic two-participant example, drawn from its data file.

The table and its prose belong to the lesson, in lesson_code/figures/<lesson>-mechanism.json
(a lesson that wants one adds its file there, nothing under scripts/). It is data, not an
import of any lesson module: editing a caption redraws this figure and re-runs nothing.
"""
from scripts.figures.svg import figure_style, new_figure, svg_text


def render(diagram):
    table = diagram["table"]
    with figure_style():
        fig, ax = new_figure(figsize=(6.4, 0.6 * (len(table["rows"]) + 1) + 0.8))
        ax.axis("off")
        cells = ax.table(cellText=table["rows"], colLabels=table["headers"], loc="center",
                         cellLoc="center", colLoc="center")
        cells.auto_set_font_size(False)
        cells.set_fontsize(11)
        cells.scale(1, 1.9)
        for (row, col), cell in cells.get_celld().items():
            cell.set_edgecolor("#8c959f")
            if row == 0 or col == 0:
                cell.set_text_props(fontweight="bold")
                cell.set_facecolor("#eaeef2")
        fig.tight_layout()
        return svg_text(fig, diagram["title"], diagram["alt"])
