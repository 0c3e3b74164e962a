"""The lesson figures, drawn from a recording alone: bar panels and the mechanism table."""
import re

from svg_output import new_figure, svg_text

BAR_COLOURS = ["#4C78A8", "#F58518", "#54A24B"]


def plain(text):
    """Drop MathJax delimiters: an SVG <desc> is read aloud, not typeset."""
    return re.sub(r"\\[()\[\]]", "", text)


def render_panels_svg(recording):
    panels = recording["data"]["panels"]
    fig, axes = new_figure(nrows=len(panels), figsize=(6.4, 2.5 * len(panels)),
                           squeeze=False)
    for ax, panel in zip(axes[:, 0], panels):
        for series in panel["series"]:
            bars = ax.bar(panel["labels"], series["y"], color=BAR_COLOURS[: len(series["y"])],
                          width=0.6, label=series["label"])
            ax.bar_label(bars, labels=[f"{v:g}" for v in series["y"]], padding=2)
        ax.set_ylabel(panel["ylabel"])
        ax.set_title(panel["series"][0]["label"], loc="left", fontsize=10)
        ax.set_ylim(0, max(max(s["y"]) for s in panel["series"]) * 1.25)
        ax.spines[["top", "right"]].set_visible(False)
    fig.suptitle("One gradient, different local storage", x=0.02, ha="left",
                 fontweight="bold")
    fig.tight_layout()
    desc = "; ".join(
        f"{panel['ylabel']} ({series['label']}): " + ", ".join(
            f"{label} {value:g}" for label, value in zip(panel["labels"], series["y"]))
        for panel in panels for series in panel["series"])
    return svg_text(fig, "One mathematical gradient, different local storage", desc)


def render_mechanism_svg(recording):
    diagram = recording["diagram"]
    table = diagram["panel"]
    fig, ax = new_figure(figsize=(6.4, diagram.get("height", 3.8) * 0.6))
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
    ax.set_title(diagram["title"], loc="left", fontweight="bold")
    fig.tight_layout()
    return svg_text(fig, diagram["title"], plain(diagram["alt"]))
