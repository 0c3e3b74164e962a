"""The sweep's time ratios in sweep.py's panels: each ratio of two programs' median times
against the size S, the ring model's values (2 and 1) dotted, the fault onset marked.
Data rows: one per p, ratio and size, with the ring model's value (the dotted line).
"""
from matplotlib.ticker import FuncFormatter

from scripts.figures.palette import LIGHT
from scripts.figures.sweep import (legend_line, log2_size_axis, onset_entries, ranks_of,
                                   render_panels)
from scripts.figures.variants import STATIC

RATIO_SERIES = (0, 2, 4)  # the palette's blue, green, vermillion
RING_MODEL_STYLE = (0, (1, 2))


def ratio_styles(analysis, palette=LIGHT):
    """ratio name -> (label, colour, line style), from the analysis's own ratio names."""
    labelled = next(iter(analysis["ratios"]["warm"].values()))  # the first p's ratios
    return {name: (labelled.get(name, {}).get("label", name),
                   palette.series[RATIO_SERIES[i % len(RATIO_SERIES)]], "--" if i >= 2 else "-")
            for i, name in enumerate(analysis["ratios"]["model"])}


def rows(analysis):
    found = []
    for ranks in ranks_of(analysis):
        ratios = analysis["ratios"]["byRanks"][str(ranks)]
        for name, (label, _, _) in ratio_styles(analysis).items():
            found += [{"ranks": ranks, "series": name, "label": label, "bytes": nbytes,
                       "ratio": ratio, "model": analysis["ratios"]["model"][name]}
                      for nbytes, ratio in zip(ratios["bytes"], ratios.get(name, []))]
    return found


def plot_ratios(analysis, ax, ranks, look, x_limits):
    ratios, model = analysis["ratios"]["byRanks"][str(ranks)], analysis["ratios"]["model"]
    for value in sorted(set(model.values())):
        ax.axhline(value, color=look.palette.ink, lw=0.9, ls=RING_MODEL_STYLE)
    for name, (_, colour, style) in ratio_styles(analysis, look.palette).items():
        if name in ratios:
            ax.plot(ratios["bytes"], ratios[name], color=colour, lw=1.2, ls=style)
    log2_size_axis(ax, ratios["bytes"], x_limits, look)
    ax.set_yscale("log", base=2)
    # One y range for every p, so the panels compare at a glance.
    values = [*model.values(), *(value for entry in analysis["ratios"]["byRanks"].values()
                                 for name in model for value in entry.get(name, []))]
    ax.set_ylim(min(values) / 1.3, max(values) * 1.3)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))


def predictions(analysis):
    """"2 and 1": the values the ring model fixes the ratios at."""
    return " and ".join(f"{v:g}" for v in sorted(set(analysis["ratios"]["model"].values()),
                                                 reverse=True))


def legend(analysis, look):
    """The ratios, then the ring model and the onset: a column each, wide."""
    ratios = [legend_line(colour, label, style)
              for label, colour, style in ratio_styles(analysis, look.palette).values()]
    marks = [legend_line(look.palette.ink, f"ring model ({predictions(analysis)})",
                         RING_MODEL_STYLE),
             *onset_entries(analysis, look, "from here calls fault in fresh output pages")]
    return ratios + marks


def alt_text(analysis):
    ranks = ranks_of(analysis)
    model = analysis["ratios"]["model"]
    labels = {name: label for name, (label, _, _) in ratio_styles(analysis).items()}
    below = analysis["faults"]["belowOnsetBytes"]
    ratio_words = "; ".join(
        f"at p = {p}, {label} {entry[name][entry['bytes'].index(below)]:.1f} (ring model "
        f"{model[name]:g})" for p, entry in analysis["ratios"]["byRanks"].items()
        for name, label in labels.items() if name in entry)
    title = ("Time ratios of XLA's collectives and of a ppermute ring against message size "
             "on logical CPU devices, with the ring model's predictions")
    desc = (f"One panel per device count p = {', '.join(map(str, ranks))}: the ratios of "
            f"the median times {', '.join(labels.values())} against the gradient size, "
            f"log-log, with the ring model's {predictions(analysis)} as dotted lines; calls "
            f"fault in fresh pages for their outputs from "
            f"{analysis['faults']['labels']['onset']}. At "
            f"{analysis['sizeLabels']['belowOnset']}, the largest size below that: "
            f"{ratio_words}.")
    return title, desc


def render(analysis, variant=STATIC):
    sizes = [b for entry in analysis["ratios"]["byRanks"].values() for b in entry["bytes"]]
    return render_panels(analysis, variant, legend, grid=(2, 1.8, 1.6), sizes=sizes,
                         plot=plot_ratios, ylabel="time ratio", alt=alt_text(analysis))
