"""What the lesson's collectives should take on a 4-chip TPU VM, written down before any run.

The model is the scaling book's ("How to Scale Your Model", part 3, "Sharded Matrices"):
on a bidirectional ring of p chips an all-gather or a reduce-scatter of V bytes takes

    T = max(T_hop * p / 2, V / W_bidi)

where W_bidi is the bytes per second a chip can push along the ring in both directions
(twice the one-way bandwidth of one link) and T_hop, about 1 us, is the fixed cost of one
hop. The first term is the latency-bound regime (p/2 hops, each at least T_hop); the
second the bandwidth-bound one, independent of p. An all-reduce is a reduce-scatter and
an all-gather: twice both terms. Every input below names its source; nothing here ran.

    python -m lesson_code.tpu_predictions \
        --data-out lesson_code/figures/distributed-03-tpu-predictions.json

writes the figure's data (tests/test_tpu_predictions.py checks the committed file is this
module's output). Pure Python: no JAX.
"""
import argparse
import json
import os
import sys

SOURCES = {
    "scaling-book-sharding": {
        "title": "How to Scale Your Model, part 3: Sharded Matrices and How to Multiply Them "
                 "(the AllGather cost and 'A note on ICI latency')",
        "url": "https://jax-ml.github.io/scaling-book/sharding"},
    "scaling-book-tpus": {
        "title": "How to Scale Your Model, part 2: How to Think About TPUs (ICI bandwidth "
                 "per link, one-way and bidirectional)",
        "url": "https://github.com/jax-ml/scaling-book/blob/"
               "0819a7d8c55ddc113f5cba0285a5f97380cac1e3/tpus.md"},
    "cloud-v5e": {
        "title": "Cloud TPU v5e: bidirectional ICI bandwidth per chip 400 GBps, 4 ICI ports",
        "url": "https://docs.cloud.google.com/tpu/docs/v5e"},
    "cloud-v6e": {
        "title": "Cloud TPU v6e: bidirectional ICI bandwidth per chip 800 GBps, 4 ICI ports",
        "url": "https://docs.cloud.google.com/tpu/docs/v6e"},
    "cloud-versions": {
        "title": "Cloud TPU supported versions: v5e slice 2x2 is 4 chips (v5litepod-4)",
        "url": "https://cloud.google.com/tpu/docs/supported-versions"},
}

HOP_LATENCY_S = 1e-6  # "typically around 1us" per hop (scaling-book-sharding)
CHIPS = 4
# One ICI link, one way, bytes/s (scaling-book-tpus). The Cloud pages' per-chip figures,
# divided by 4 ports and 2 directions, give 50 and 100 GB/s: within 11 % of these.
MACHINES = {
    "v5litepod-4": {"chip": "TPU v5e", "linkOneWayBytesPerS": 4.5e10,
                    "topology": "2x2", "topologySource": "cloud-versions",
                    "sources": ["scaling-book-tpus", "cloud-v5e", "cloud-versions"]},
    "v6e-4": {"chip": "TPU v6e (Trillium)", "linkOneWayBytesPerS": 9e10,
              # Not found in a page checked here: assumed to be v5e's 2x2.
              "topology": "2x2 (assumed)", "topologySource": None,
              "sources": ["scaling-book-tpus", "cloud-v6e"]},
}
# The lesson's 32-byte gradient, and the sizes where bandwidth should dominate.
SIZES = [32, 2**20, 32 * 2**20]
# The curve: every power of two a size sweep measures, 8 B to 32 MiB.
CURVE_SIZES = [2**k for k in range(3, 26)]
# What jax.devices()[0].device_kind says on each VM: a TPU recording names its machine so.
# The first of each is JAX's own name for the chip (_TPU_V5_LITE and _TPU_V6_LITE in
# _src/mesh_utils.py of JAX's source; tests/test_tpu_predictions.py reads them from the
# installed JAX); the second is the name Pallas also accepts (_src/pallas/mosaic/tpu_info.py).
DEVICE_KINDS = {"v5litepod-4": ["TPU v5 lite", "TPU v5e"], "v6e-4": ["TPU v6 lite", "TPU v6e"]}
COLLECTIVES = {"reduce_scatter": 1, "all_gather": 1, "all_reduce": 2}  # ring phases


def phase_seconds(size, machine, chips=CHIPS, hop=HOP_LATENCY_S):
    """One ring phase (a reduce-scatter or an all-gather) of `size` bytes."""
    bidirectional = 2 * machine["linkOneWayBytesPerS"]
    return max(hop * chips / 2, size / bidirectional)


def crossover_bytes(machine, chips=CHIPS, hop=HOP_LATENCY_S):
    """The size where the two terms meet: below it, latency; above it, bandwidth."""
    return hop * chips / 2 * 2 * machine["linkOneWayBytesPerS"]


def predictions():
    rows = []
    for name, machine in MACHINES.items():
        for size in SIZES:
            for collective, phases in COLLECTIVES.items():
                seconds = phases * phase_seconds(size, machine)
                bound = "latency" if size < crossover_bytes(machine) else "bandwidth"
                rows.append({"machine": name, "collective": collective, "bytes": size,
                             "predictedUs": round(seconds * 1e6, 3), "bound": bound})
    return {"title": f"Predicted on {CHIPS} TPU chips, before any TPU run",
            "model": "T = phases * max(T_hop * p / 2, V / (2 * W_link))",
            "chips": CHIPS, "hopLatencyS": HOP_LATENCY_S, "sizes": SIZES,
            "machines": {name: {**machine, "crossoverBytes": crossover_bytes(machine),
                                "deviceKinds": DEVICE_KINDS[name]}
                         for name, machine in MACHINES.items()},
            "curve": {name: {collective: [[size, round(phases * phase_seconds(size, machine)
                                                       * 1e6, 3)] for size in CURVE_SIZES]
                             for collective, phases in COLLECTIVES.items()}
                      for name, machine in MACHINES.items()},
            "sources": SOURCES, "rows": rows}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-out", metavar="PATH", required=True)
    args = parser.parse_args(argv)
    temp = f"{args.data_out}.{os.getpid()}.tmp"
    with open(temp, "w") as out:
        out.write(json.dumps(predictions(), indent=2) + "\n")
    os.replace(temp, args.data_out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
