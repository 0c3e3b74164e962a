"""A lesson's bar panels, drawn from its CPU recording's `data.panels` alone.

A panel with one series colours each bar on its own (the bars are the things compared); a
panel with several draws them side by side in each label's group, one colour per series,
with a legend, so no series hides another. lesson_code/CONTRACT.md gives the format.
"""
from scripts.figures.svg import figure_style, new_figure, svg_text

BAR_COLOURS = ["#4C78A8", "#F58518", "#54A24B", "#B279A2", "#9D755D", "#72B7B2"]
KINDS = ("bar",)


def render(recording):
    panels = recording["data"]["panels"]
    for number, panel in enumerate(panels):
        if panel.get("kind", "bar") not in KINDS:
            raise ValueError(f"panel {number} is of kind {panel['kind']!r}; only "
                             f"{', '.join(KINDS)} panels are drawn (lesson_code/CONTRACT.md)")
    # The lesson names its figure (lesson_code/CONTRACT.md); the renderer knows no lesson.
    title = recording["data"].get("panelsTitle", f"The panels of {recording['lessonId']}")
    with figure_style():
        fig, axes = new_figure(nrows=len(panels), figsize=(6.4, 2.5 * len(panels)),
                               squeeze=False)
        for ax, panel in zip(axes[:, 0], panels):
            if len(panel["series"]) == 1:
                one_series(ax, panel)
            else:
                side_by_side(ax, panel)
            ax.set_ylabel(panel["ylabel"])
            ax.set_ylim(0, max(max(s["y"]) for s in panel["series"]) * 1.25)
            ax.spines[["top", "right"]].set_visible(False)
        fig.suptitle(title, x=0.02, ha="left",
                     fontweight="bold")
        fig.tight_layout()
        desc = "; ".join(
            f"{panel['ylabel']} ({series['label']}): " + ", ".join(
                f"{label} {value:g}" for label, value in zip(panel["labels"], series["y"]))
            for panel in panels for series in panel["series"])
        return svg_text(fig, title, desc)


def one_series(ax, panel):
    (series,) = panel["series"]
    bars = ax.bar(panel["labels"], series["y"], color=BAR_COLOURS[: len(series["y"])],
                  width=0.6, label=series["label"])
    ax.bar_label(bars, labels=[f"{v:g}" for v in series["y"]], padding=2)
    ax.set_title(panel.get("title", series["label"]), loc="left", fontsize=10)


def side_by_side(ax, panel):
    """Each label a group of bars, one per series, in the series' colour; a legend."""
    count = len(panel["series"])
    width = 0.8 / count
    positions = range(len(panel["labels"]))
    for number, series in enumerate(panel["series"]):
        offset = (number - (count - 1) / 2) * width
        bars = ax.bar([x + offset for x in positions], series["y"], width=width * 0.95,
                      color=BAR_COLOURS[number % len(BAR_COLOURS)], label=series["label"])
        ax.bar_label(bars, labels=[f"{v:g}" for v in series["y"]], padding=2, fontsize=8)
    ax.set_xticks(list(positions), panel["labels"])
    ax.legend(loc="upper right", fontsize=8, frameon=False, ncols=min(count, 3))
    ax.set_title(panel.get("title", " vs ".join(s["label"] for s in panel["series"])),
                 loc="left", fontsize=10)
