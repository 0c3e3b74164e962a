"""What the lesson's collectives should take on a 4-chip TPU VM, written down before any
run, each with the band outside which a measurement contradicts it.

The scaling book's ring ("How to Scale Your Model", part 3, "AllGather cost" and "A note
on ICI latency") with the ring's (p - 1)/p kept: one phase of V bytes over p chips takes
T = max(T_hop * p / 2, (p - 1)/p * V / (links * W)), W one link's one-way bandwidth and
links the distinct links to a chip's two ring neighbours; an all-reduce is two phases.
Every input names its source; nothing here ran. `python -m lesson_code.tpu_predictions
--data-out lesson_code/figures/distributed-03-tpu-predictions.json` writes them (a test
checks the committed file); distributed_03_tpu_comparison.py judges a TPU sweep against
them. The standard library alone.
"""
import importlib
import math
import sys

BOOK = "https://github.com/jax-ml/scaling-book/blob/0819a7d8c55ddc113f5cba0285a5f97380cac1e3"
SOURCES = {
    "scaling-book-sharding": {
        "title": "How to Scale Your Model, part 3: Sharded Matrices and How to Multiply Them "
                 "(the AllGather cost, 'A note on ICI latency' and Pop Quiz 2)",
        "url": f"{BOOK}/sharding.md"},
    "scaling-book-tpus": {
        "title": "How to Scale Your Model, part 2: How to Think About TPUs (ICI bandwidth "
                 "per link, one-way and bidirectional; no wraparound below a full axis)",
        "url": f"{BOOK}/tpus.md"},
    "cloud-v5e": {
        "title": "Cloud TPU v5e: bidirectional ICI bandwidth per chip 400 GBps, 4 ICI ports",
        "url": "https://docs.cloud.google.com/tpu/docs/v5e"},
    "cloud-v6e": {
        "title": "Cloud TPU v6e: bidirectional ICI bandwidth per chip 800 GBps, 4 ICI ports",
        "url": "https://docs.cloud.google.com/tpu/docs/v6e"},
    "cloud-versions": {
        "title": "Cloud TPU supported versions: v5e slice 2x2 is 4 chips (v5litepod-4)",
        "url": "https://cloud.google.com/tpu/docs/supported-versions"},
    "jax-mesh-utils": {
        "title": "JAX 0.10.2 jax/_src/mesh_utils.py: a 2x2 v5e or v6e is ordered as the "
                 "ring 0, 1, 3, 2 (_TRAY_2x2_RING_ORDER), which jax.make_mesh uses",
        "url": "https://github.com/jax-ml/jax/blob/jax-v0.10.2/jax/_src/mesh_utils.py"},
}

HOP_LATENCY_S = 1e-6  # "typically around 1us" per hop (scaling-book-sharding)
CHIPS = 4
RANKS = [2, 4]  # the p a TPU sweep measures on the VM: each p of the sweep that 4 chips hold
# One ICI link, one way, bytes/s (scaling-book-tpus). The Cloud pages' per-chip figures,
# divided by 4 ports and 2 directions, give 50 and 100 GB/s: 11 % above these.
MACHINES = {
    "v5litepod-4": {"chip": "TPU v5e", "linkOneWayBytesPerS": 4.5e10,
                    "topology": "2x2", "topologySource": "cloud-versions",
                    "sources": ["scaling-book-tpus", "cloud-v5e", "cloud-versions"]},
    "v6e-4": {"chip": "TPU v6e (Trillium)", "linkOneWayBytesPerS": 9e10,
              # Not found in a page checked here: assumed to be v5e's 2x2.
              "topology": "2x2 (assumed)", "topologySource": None,
              "sources": ["scaling-book-tpus", "cloud-v6e"]},
}
# The lesson's 32-byte gradient (latency-bound) and the sweep's largest size
# (bandwidth-bound): both sizes the sweep measures (8 x 4^k bytes).
SIZES = [32, 32 * 2**20]
# The curve: every power of two a size sweep measures, 8 B to 32 MiB.
CURVE_SIZES = [2**k for k in range(3, 26)]
# What jax.devices()[0].device_kind says on each VM: a TPU recording names its machine so.
# The first of each is JAX's own name for the chip (_TPU_V5_LITE and _TPU_V6_LITE in
# _src/mesh_utils.py of JAX's source; tests/test_tpu_predictions.py reads them from the
# installed JAX); the second is the name Pallas also accepts (_src/pallas/mosaic/tpu_info.py).
DEVICE_KINDS = {"v5litepod-4": ["TPU v5 lite", "TPU v5e"], "v6e-4": ["TPU v6 lite", "TPU v6e"]}
COLLECTIVES = {"reduce_scatter": 1, "all_gather": 1, "all_reduce": 2}  # ring phases

# Measured over predicted, written down before any run: a result outside its band
# contradicts the model at that point.
BANDS = {
    "bandwidth": {
        "low": 0.9, "high": 2.0,
        "why": "faster than 0.9x would need links 11 % faster than the book's, more than the "
               "Cloud pages' per-chip figures give; slower than 2x is well past the book's "
               "own gap between model and profile, 680 us profiled against the 560 us it "
               "models for 34 MB on a v5e line of 4 without wraparound (Pop Quiz 2, 1.2x; "
               "the 377 us it first gives assumed a ring, which it withdraws in the same "
               "paragraph), leaving room for a 4-cycle and for XLA's own algorithm"},
    "latency": {
        "low": 0.5, "high": 3.0,
        "why": "below 0.5x a hop would cost under half the book's 'typically around 1us'; "
               "above 3x is more than the book's own gap, 'closer to 8us' against its 3 us "
               "for three hops (Pop Quiz 2, 2.7x)"},
}


def ring_links(ranks):
    """Distinct links from a chip to its two ring neighbours: one when p = 2 (both are
    the same chip), two on a cycle of p >= 3 chips, such as the 2x2's 0, 1, 3, 2."""
    return 1 if ranks == 2 else 2


def phase_seconds(size, machine, ranks, hop=HOP_LATENCY_S):
    """One ring phase (a reduce-scatter or an all-gather) of `size` bytes over `ranks`."""
    into_each_chip = (ranks - 1) / ranks * size
    through = ring_links(ranks) * machine["linkOneWayBytesPerS"]
    return max(hop * ranks / 2, into_each_chip / through)


def book_phase_seconds(size, machine, ranks, hop=HOP_LATENCY_S):
    """The book's closing form, max(T_hop p / 2, V / W_bidi): the same for every p."""
    return max(hop * ranks / 2, size / (2 * machine["linkOneWayBytesPerS"]))


def crossover_bytes(machine, ranks, hop=HOP_LATENCY_S):
    """The size where the two terms meet: below it, latency; above it, bandwidth."""
    return hop * ranks / 2 * ring_links(ranks) * machine["linkOneWayBytesPerS"] \
        * ranks / (ranks - 1)


def ratio_question():
    """t(p = 4) / t(p = 2) at the largest size, where bandwidth alone sets both: the model
    says (3/4 / 2) / (1/2 / 1) = 0.75; the book's "independent of p" says 1; a ring that
    kept (p - 1)/p but gave p = 2 two links, as W_bidi would, says 1.5. The band reaches
    halfway (a geometric mean) to the nearest rival, so a result in it favours this model
    over both."""
    size, machine = SIZES[-1], MACHINES["v5litepod-4"]  # a ratio: the VM cancels
    predicted = phase_seconds(size, machine, 4) / phase_seconds(size, machine, 2)
    rivals = {"the book's V / W_bidi, independent of p": 1.0,
              "(p - 1)/p with W_bidi at p = 2 too": (3 / 4) / (1 / 2)}
    factor = math.sqrt(min(rivals.values(), key=lambda r: abs(math.log(r / predicted)))
                       / predicted)
    return {"bytes": size, "numerator": 4, "denominator": 2, "predicted": predicted,
            "rivals": rivals,
            "band": {"low": round(predicted / factor, 3), "high": round(predicted * factor, 3),
                     "why": "halfway, as a factor, from the model's 0.75 to the nearest rival"}}


def predictions():
    rows = []
    for name, machine in MACHINES.items():
        for ranks in RANKS:
            for size in SIZES:
                bound = "latency" if size < crossover_bytes(machine, ranks) else "bandwidth"
                for collective, phases in COLLECTIVES.items():
                    seconds = phases * phase_seconds(size, machine, ranks)
                    book = phases * book_phase_seconds(size, machine, ranks)
                    rows.append({"machine": name, "collective": collective, "ranks": ranks,
                                 "bytes": size, "predictedUs": round(seconds * 1e6, 3),
                                 "bookUs": round(book * 1e6, 3), "bound": bound,
                                 "band": {key: BANDS[bound][key] for key in ("low", "high")}})
    return {"title": f"Predicted on {CHIPS} TPU chips at p = 2 and 4, before any TPU run",
            "model": "T = phases * max(T_hop * p / 2, (p - 1)/p * V / (links * W_link))",
            "chips": CHIPS, "ranks": RANKS, "hopLatencyS": HOP_LATENCY_S, "sizes": SIZES,
            "links": {str(p): ring_links(p) for p in RANKS},
            "machines": {name: {**machine,
                                "crossoverBytes": {str(p): crossover_bytes(machine, p)
                                                   for p in RANKS},
                                "deviceKinds": DEVICE_KINDS[name]}
                         for name, machine in MACHINES.items()},
            "curve": {name: {str(p): {collective: [
                [size, round(phases * phase_seconds(size, machine, p) * 1e6, 3)]
                for size in CURVE_SIZES] for collective, phases in COLLECTIVES.items()}
                for p in RANKS} for name, machine in MACHINES.items()},
            "bands": BANDS, "ratio": ratio_question(), "sources": SOURCES, "rows": rows}


def main(argv=None):
    """--data-out as every lesson program writes it: a link, a device or a folder refused in
    one line, the file replaced whole. The shell is named, not imported, so that the
    analyses that read these predictions do not depend on it (lesson_code/__init__.py)."""
    program = importlib.import_module("lesson_code.program")
    parser = program.OneLineParser(prog="python -m lesson_code.tpu_predictions",
                                   description=__doc__.splitlines()[0])
    parser.add_argument("--data-out", metavar="PATH", required=True, type=program.data_out_path)
    program.write_json(parser.parse_args(argv).data_out, predictions())
    return 0


if __name__ == "__main__":
    sys.exit(main())
