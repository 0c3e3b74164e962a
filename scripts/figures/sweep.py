"""Draw the sweep figure from the recording alone: time per call and bus bandwidth vs size."""
import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

from scripts.figures.svg import DETERMINISTIC, figure_style, svg_text
from scripts.sweep_model import COLLECTIVES, bus_factor, format_bytes

# Okabe-Ito colours stay distinct for colour-blind readers; the figure keeps an opaque
# white background so it reads the same on the site's dark theme.
COLOURS = dict(zip(COLLECTIVES, ("#0072B2", "#D55E00", "#009E73", "#CC79A7")))
LABELS = {"all_reduce": "all-reduce (psum)", "reduce_scatter": "reduce-scatter",
          "all_gather": "all-gather", "reduce_scatter_all_gather": "reduce-scatter + all-gather"}
MARKERS = {2: "o", 4: "s", 8: "^"}
FIT_DASH = (0, (4, 3))


def series(recording):
    """(collective, ranks) -> [bytes, medianUs, busbwGBps] arrays by size, in legend order."""
    grouped = {}
    order = sorted(recording["rows"], key=lambda r: (COLLECTIVES.index(r["collective"]),
                                                     r["ranks"], r["bytes"]))
    for row in order:
        grouped.setdefault((row["collective"], row["ranks"]), []).append(
            (row["bytes"], row["medianUs"], row["busbwGBps"]))
    return {key: [np.array(column) for column in zip(*points)] for key, points in grouped.items()}


def plot_measurements_and_fits(recording, time_ax, bus_ax):
    for (collective, ranks), (nbytes, median_us, busbw) in series(recording).items():
        solid = {"color": COLOURS[collective], "marker": MARKERS.get(ranks, "D"), "lw": 1.6,
                 "ms": 5}
        time_ax.plot(nbytes, median_us, **solid)
        bus_ax.plot(nbytes, busbw, **solid)
        fit = recording["fits"][collective][str(ranks)]
        grid = np.geomspace(nbytes.min(), nbytes.max(), 64)
        model_s = fit["alphaUs"] * 1e-6 + grid / (fit["betaGBps"] * 1e9)
        dashed = {"color": COLOURS[collective], "ls": FIT_DASH, "lw": 0.9, "alpha": 0.6}
        time_ax.plot(grid, model_s * 1e6, **dashed)
        bus_ax.plot(grid, grid / model_s / 1e9 * bus_factor(collective, ranks), **dashed)
    ceiling = recording["memcpyGBps"]
    bus_ax.axhline(ceiling, color="0.25", lw=1.2, ls=":")
    bus_ax.annotate(f"host memcpy {ceiling:.1f} GB/s", (0.02, ceiling),
                    xycoords=("axes fraction", "data"), xytext=(0, 4),
                    textcoords="offset points", fontsize=9, color="0.25")


def style_axes(recording, time_ax, bus_ax):
    sizes = sorted({row["bytes"] for row in recording["rows"]})
    for ax in (time_ax, bus_ax):
        ax.set_facecolor("white")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        # Labels every 16x, a tick at every measured size: twelve labels would collide.
        ax.xaxis.set_major_locator(FixedLocator([8 * 16**k for k in range(7)]))
        ax.xaxis.set_major_formatter(FuncFormatter(format_bytes))
        ax.xaxis.set_minor_locator(FixedLocator(sizes))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlim(min(sizes) / 1.6, max(sizes) * 1.6)
        ax.set_xlabel("gradient size S (float32 bytes, full array)")
        ax.grid(True, which="major", color="0.88", lw=0.8)
        ax.spines[["top", "right"]].set_visible(False)
    time_ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    time_ax.set_ylabel("time per call (µs, median)")
    time_ax.set_title("Time per call: flat where latency dominates", fontsize=11, loc="left")
    bus_ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    bus_ax.set_ylabel("bus bandwidth (GB/s, nccl-tests busbw)")
    bus_ax.set_title("Bus bandwidth: rises until bandwidth dominates", fontsize=11, loc="left")


def add_legend(recording, fig):
    """Three columns, for what the colour, the marker and the line style each mean."""
    ranks = sorted({row["ranks"] for row in recording["rows"]})
    colours = [Line2D([], [], color=COLOURS[c], lw=2.2, label=LABELS[c]) for c in COLLECTIVES]
    markers = [Line2D([], [], color="0.3", marker=MARKERS.get(p, "D"), ls="",
                      label=f"p = {p} devices") for p in ranks]
    styles = [Line2D([], [], color="0.3", lw=1.6, label="measured median"),
              Line2D([], [], color="0.3", lw=1.0, ls=FIT_DASH, label="alpha-beta fit"),
              Line2D([], [], color="0.25", lw=1.2, ls=":", label="host memcpy ceiling")]
    # A legend fills column by column, so shorter columns are padded with invisible entries.
    height = max(len(colours), len(markers), len(styles))
    blank = Line2D([], [], alpha=0, label=" ")
    handles = [h for column in (colours, markers, styles)
               for h in column + [blank] * (height - len(column))]
    fig.legend(handles=handles, loc="lower center", ncol=3, frameon=False, fontsize=9.5,
               columnspacing=3)


def draw_panels(recording):
    fig = Figure(figsize=(11, 5.6), facecolor="white")
    time_ax, bus_ax = fig.subplots(1, 2)
    plot_measurements_and_fits(recording, time_ax, bus_ax)
    style_axes(recording, time_ax, bus_ax)
    add_legend(recording, fig)
    fig.subplots_adjust(left=0.085, right=0.99, top=0.93, bottom=0.27, wspace=0.25)
    return fig


def alt_text(recording):
    """Title and description for screen readers, with the numbers the figure shows."""
    ranks = sorted({row["ranks"] for row in recording["rows"]})
    p = 4 if 4 in ranks else ranks[0]
    fits = "; ".join(
        f"{LABELS[c]}: alpha {fit['alphaUs']:.0f} µs, beta {fit['betaGBps']:.2f} GB/s, "
        f"half-latency size {format_bytes(fit['nHalfBytes'])}"
        for c in COLLECTIVES for fit in [recording["fits"][c][str(p)]])
    sizes = [row["bytes"] for row in recording["rows"]]
    title = "Collective time and bus bandwidth against message size on logical CPU devices"
    desc = (f"Two log-log panels over gradient sizes from {format_bytes(min(sizes))} to "
            f"{format_bytes(max(sizes))} for p = {', '.join(map(str, ranks))} devices. "
            "Left: median time per call. Right: nccl-tests bus bandwidth under a host memcpy "
            f"ceiling of {recording['memcpyGBps']:.1f} GB/s. Solid lines are measurements, "
            f"dashed lines the fitted alpha-beta model t = alpha + S / beta. At p = {p}: {fits}.")
    return title, desc


def render(recording):
    title, desc = alt_text(recording)
    # matplotlib's defaults, not the lesson figures' style: this figure sets its own look.
    with figure_style(DETERMINISTIC):
        return svg_text(draw_panels(recording), title, desc)
