"""Turn measured rows into the sweep recording, validate it, and write it atomically."""
import json
from collections import defaultdict
from datetime import datetime, timezone

from sweep_freshness import ROOT, content_hash
from sweep_model import (COLLECTIVES, algbw_gbps, busbw_gbps, fit_alpha_beta,
                         max_relative_residual)

SCHEMA = ROOT / "recordings" / "sweep.schema.json"


class WrongResults(RuntimeError):
    """A collective returned values that differ from NumPy: nothing may be recorded."""


def check_rows(rows):
    bad = [r for r in rows if r["wrong"]]
    if bad:
        where = ", ".join(f"{r['collective']} p={r['ranks']} {r['bytes']} B: {r['wrong']} wrong"
                          for r in bad)
        raise WrongResults(f"results differ from the NumPy reference ({where}); "
                           "nothing was written")


def with_bandwidths(row):
    seconds = row["medianUs"] * 1e-6
    return {**row,
            "algbwGBps": algbw_gbps(row["bytes"], seconds),
            "busbwGBps": busbw_gbps(row["collective"], row["ranks"], row["bytes"], seconds)}


def fit_rows(rows):
    """fits[collective][str(ranks)], string keys so a page can address fits.all_reduce.4."""
    series = defaultdict(list)
    for row in rows:
        series[row["collective"], row["ranks"]].append((row["bytes"], row["medianUs"] * 1e-6))
    fits = {c: {} for c in COLLECTIVES if any(key[0] == c for key in series)}
    for (collective, ranks), points in sorted(series.items()):
        nbytes, seconds = zip(*points)
        alpha, beta = fit_alpha_beta(nbytes, seconds)
        fits[collective][str(ranks)] = {
            "alphaUs": alpha * 1e6,
            "betaGBps": beta / 1e9,
            "nHalfBytes": alpha * beta,  # where S / beta == alpha
            "nHalfKiB": alpha * beta / 1024,
            "maxRelResidual": max_relative_residual(nbytes, seconds, alpha, beta)}
    return fits


def build_recording(rows, environment, method, memcpy_gbps, duration_s):
    check_rows(rows)
    return {
        "schemaVersion": 1,
        "lessonId": "distributed-03",
        "kind": "sweep",
        "contentHash": content_hash(),
        "generatedAt": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "provenance": f"recorded_{environment['backend']}_computation",
        "environment": environment,
        "method": method,
        "rows": [with_bandwidths(r) for r in rows],
        "memcpyGBps": memcpy_gbps,
        "fits": fit_rows(rows),
        "durationS": duration_s,
    }


def validate(recording):
    import jsonschema  # only writers and tests validate; --check never needs it

    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft202012Validator(schema).validate(recording)


def recording_text(recording):
    return json.dumps(recording, indent=2) + "\n"
