"""What each collective transposes to under jax.grad, as JAX 0.10.2's `_src/lax/parallel.py`
says: a JAX upgrade that changes one fails here, before the autodiff page is wrong."""
import importlib
import json
import re

import jax
import numpy as np
import pytest
from jax.sharding import Mesh

from conftest import ROOT, SEED

lesson = importlib.import_module(SEED.module)
going_further = importlib.import_module(SEED.going_further)

TRANSPOSES = {"psum": [], "psum_scatter": ["all_gather"], "all_gather": ["reduce_scatter"],
              "all_gather_invarying": ["dynamic_slice"]}
# Data parallel gets its all-reduce from autodiff (the transpose of the implicit pvary);
# ZeRO-3 / FSDP with a plain gather gets a reduce-scatter (weights as a vector or a
# matrix); with to="invarying" the gradient is summed whole on every device and sliced.
TRAINING = {"replicated_weights": ["all_reduce"],
            **dict.fromkeys(("sharded_weights", "sharded_matrix"),
                            ["all_gather", "reduce_scatter"]),
            **dict.fromkeys(("sharded_weights_invarying", "sharded_matrix_invarying"),
                            ["all_gather", "all_reduce", "dynamic_slice"])}


def mesh_of(ranks):
    return Mesh(np.asarray(jax.devices()[:ranks]), ("data",))


@pytest.mark.parametrize("ranks", [2, 4])
def test_each_collective_and_each_training_gradient_asks_for_what_the_jax_source_says(ranks):
    # Both also check the gradients' values against NumPy; XLA:CPU keeps every collective.
    found = going_further.autodiff_collectives(
        going_further.collective_transposes(mesh_of(ranks), 2 * ranks),
        going_further.training_gradients(mesh_of(ranks), lesson.make_problem(ranks)))
    assert (found["transposes"], found["trainingGradients"]) == (TRANSPOSES, TRAINING)
    for asked, compiled in (("transposes", "compiledTransposeWords"),
                            ("trainingGradients", "compiledTrainingWords")):
        assert found[compiled] == {name: lesson.hlo_names(set(ops) - {"dynamic_slice"})
                                   for name, ops in found[asked].items()}


def test_the_lesson_expects_and_its_recording_keeps_these():
    assert (going_further.EXPECTED_TRANSPOSES, going_further.EXPECTED_TRAINING) == \
        (TRANSPOSES, TRAINING)
    data = json.loads((ROOT / "recordings" / f"{lesson.LESSON_ID}.cpu.json").read_text())
    recorded = data["data"]["autodiff"]
    assert (recorded["transposes"], recorded["trainingGradients"]) == (TRANSPOSES, TRAINING)
    # What a program asks for is never said to run (content review turn 7, N2).
    assert "gradient asks for:" in data["stdout"] and "runs:" not in data["stdout"]


ANSWER = re.compile(r'^\?\?\? success[^\n]*\n((?:(?: {4}[^\n]*)?\n)+)', re.MULTILINE)
NOT_PROSE = re.compile(r"\{\{.*?\}\}|`[^`]*`|\$\$.*?\$\$|\$[^$]*\$", re.DOTALL)
COLLECTIVE_WORDS = re.compile(r"\b(all-reduce|reduce-scatter|all-gather|dynamic-slice|"
                              r"all-to-all|collective-permute|psum|psum_scatter|all_gather|"
                              r"ppermute|no collective)\b", re.IGNORECASE)


def answer_claims(body):
    """Its first sentence and its bold phrases, without directives, code and formulas."""
    prose = NOT_PROSE.sub("X", " ".join(body.split()))
    first = re.split(r"(?<=[.!?])(?:\*\*)?\s", prose, maxsplit=1)[0]
    return [first, *re.findall(r"\*\*(.+?)\*\*", prose)]


def test_no_answer_names_what_a_program_runs_in_the_pages_own_words():
    """An answer names a program's collective from the recording, so a JAX that lowers
    otherwise changes the answer instead of contradicting it."""
    typed = []
    for page in sorted((ROOT / "docs").rglob("*.md")):
        text = page.read_text()
        for answer in ANSWER.finditer(text):
            line = text.count("\n", 0, answer.start()) + 1
            for claim in answer_claims(answer[1]):
                if found := COLLECTIVE_WORDS.findall(claim):
                    typed.append(f"{page.relative_to(ROOT)}:{line}: "
                                 f"an answer's first sentence or bold phrase names "
                                 f"{', '.join(found)}; the rule (lesson_code/CONTRACT.md): say "
                                 f"what a program runs with {{{{ rec: }}}}, from the recording")
    assert typed == [], "\n".join(typed)
    assert answer_claims("    **A `psum`.** The {{ rec:a:b }}. No all-gather here.\n") \
        == ["**A X.", "A X."]
