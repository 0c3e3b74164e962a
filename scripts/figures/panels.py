"""The lesson's bar panels, drawn from its CPU recording's `data.panels` alone."""
from scripts.figures.svg import figure_style, new_figure, svg_text

BAR_COLOURS = ["#4C78A8", "#F58518", "#54A24B"]


def render(recording):
    panels = recording["data"]["panels"]
    # The lesson names its figure (lesson_code/CONTRACT.md); the renderer knows no lesson.
    title = recording["data"].get("panelsTitle", f"The panels of {recording['lessonId']}")
    with figure_style():
        fig, axes = new_figure(nrows=len(panels), figsize=(6.4, 2.5 * len(panels)),
                               squeeze=False)
        for ax, panel in zip(axes[:, 0], panels):
            for series in panel["series"]:
                bars = ax.bar(panel["labels"], series["y"],
                              color=BAR_COLOURS[: len(series["y"])], width=0.6,
                              label=series["label"])
                ax.bar_label(bars, labels=[f"{v:g}" for v in series["y"]], padding=2)
            ax.set_ylabel(panel["ylabel"])
            ax.set_title(panel["series"][0]["label"], loc="left", fontsize=10)
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
