"""A lesson's bar panels, from its CPU recording's `data.panels` (`{"kind": "bar",
"labels", "ylabel", "series": [{"label", "y"}], "title"?}`) and `data.panelsTitle`:
several series side by side, with a legend. Data rows: one per bar.
"""
import textwrap

from scripts.figures.palette import LIGHT
from scripts.figures.svg import STYLE, figure_style, new_figure, svg_text
from scripts.figures.variants import NARROW_IN, STATIC

KINDS = ("bar",)


def panels_of(recording):
    panels = recording["data"]["panels"]
    for number, panel in enumerate(panels):
        if panel.get("kind", "bar") not in KINDS:
            raise ValueError(f"panel {number} is of kind {panel['kind']!r}; only "
                             f"{', '.join(KINDS)} panels are drawn (lesson_code/CONTRACT.md)")
    return panels


def panel_title(panel):
    """The panel's own title, else its series' labels (one series: its label)."""
    return panel.get("title", " vs ".join(series["label"] for series in panel["series"]))


def rows(recording):
    return [{"panel": panel_title(panel), "ylabel": panel["ylabel"], "series": series["label"],
             "label": label, "value": value}
            for panel in panels_of(recording) for series in panel["series"]
            for label, value in zip(panel["labels"], series["y"])]


def render(recording, variant=STATIC):
    panels = panels_of(recording)
    # The lesson names its figure (lesson_code/CONTRACT.md); the renderer knows no lesson.
    title = recording["data"].get("panelsTitle", f"The panels of {recording['lessonId']}")
    palette = variant.palette
    width, font = (NARROW_IN, 9) if variant.narrow else (6.4, 10)
    with figure_style({**STYLE, "font.size": font}, palette):
        fig, axes = new_figure(nrows=len(panels), figsize=(width, 2.5 * len(panels)), squeeze=False)
        for ax, panel in zip(axes[:, 0], panels):
            if variant.narrow:  # labels wrap at their hyphens and spaces, titles too
                panel = {**panel, "labels": [textwrap.fill(label, 10) for label in panel["labels"]]}
            if len(panel["series"]) == 1:
                one_series(ax, panel, palette.bars)
            else:
                side_by_side(ax, panel, palette.bars, font)
            ax.set_title(panel_title(panel), loc="left", fontsize=font)
            ax.set_ylabel(panel["ylabel"])
            ax.set_ylim(0, max(max(s["y"]) for s in panel["series"]) * 1.25)
            ax.spines[["top", "right"]].set_visible(False)
        fig.suptitle(textwrap.fill(title, 40) if variant.narrow else title, x=0.02, ha="left",
                     fontweight="bold")
        fig.tight_layout()
        desc = "; ".join(
            f"{panel['ylabel']} ({series['label']}): " + ", ".join(
                f"{label} {value:g}" for label, value in zip(panel["labels"], series["y"]))
            for panel in panels for series in panel["series"])
        return svg_text(fig, title, desc)


def one_series(ax, panel, colours=LIGHT.bars):
    (series,) = panel["series"]
    bars = ax.bar(panel["labels"], series["y"],
                  color=[colours[i % len(colours)] for i in range(len(series["y"]))],
                  width=0.6, label=series["label"])
    ax.bar_label(bars, labels=[f"{v:g}" for v in series["y"]], padding=2)


def side_by_side(ax, panel, colours=LIGHT.bars, font=10):
    count = len(panel["series"])
    width = 0.8 / count
    positions = range(len(panel["labels"]))
    for number, series in enumerate(panel["series"]):
        offset = (number - (count - 1) / 2) * width
        bars = ax.bar([x + offset for x in positions], series["y"], width=width * 0.95,
                      color=colours[number % len(colours)], label=series["label"])
        ax.bar_label(bars, labels=[f"{v:g}" for v in series["y"]], padding=2, fontsize=0.8 * font)
    ax.set_xticks(list(positions), panel["labels"])
    ax.legend(loc="upper right", fontsize=0.8 * font, frameon=False, ncols=min(count, 3))
