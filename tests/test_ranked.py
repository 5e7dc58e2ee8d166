"""The classes ``top_k`` ranks events into are found by name in a process that never built
the query: a Spark worker unpickling a plan that carries them, a restarted driver reading a
saved state (``tempo.plan.ranked``)."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import attrs
import pytest

from tempo.plan import ranked
from tempo.plan.ranked import ranked_classes
from tests.strategies import Ev


@attrs.frozen
class Nested_Reading:  # an underscore in the name, as in the module's: each is tried as a dot and as itself
    key: int


def test_a_fresh_process_makes_the_classes_of_a_payload_class_from_their_names() -> None:
    saved = []
    for payload_type, event in ((Ev, None), (Nested_Reading, Nested_Reading(3))):
        rank, top = ranked_classes(payload_type)
        saved.append(pickle.dumps((rank, top(ranked=[rank(1, event)]))))
    program = (
        "import pickle, sys\n"
        "for line in sys.stdin.buffer.read().split(b'--'):\n"
        "    rank, top = pickle.loads(bytes.fromhex(line.decode()))\n"
        "    print(rank.__name__, top.ranked[0])\n"
    )
    root = Path(__file__).resolve().parents[1]
    run = subprocess.run(
        [sys.executable, "-c", program],
        input=b"--".join(s.hex().encode() for s in saved),
        capture_output=True,
        cwd=root,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr.decode()
    assert run.stdout.decode().splitlines() == [
        "Ranked_tests_strategies_Ev Ranked_tests_strategies_Ev(rank=1, event=None)",
        "Ranked_tests_test_ranked_Nested_Reading Ranked_tests_test_ranked_Nested_Reading(rank=1, event=Nested_Reading(key=3))",
    ]


def test_a_name_that_spells_no_payload_class_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no importable payload class"):
        ranked.Ranked_no_such_module_Thing
    with pytest.raises(AttributeError, match="has no attribute 'Other'"):
        ranked.Other
