"""backend_adapters/executorch_blobfuzz.py: mutated blobs, one forked child each, run through the case core."""

from __future__ import annotations

import io
import os

import pytest

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the tool forks a child per blob")


@pytest.mark.slow
def test_each_mutated_blob_gets_one_line_of_the_table():
    pytest.importorskip("executorch.runtime", reason="executorch is not installed (pip install 'torch-backend-conformance[executorch]')")
    from backend_adapters import executorch_blobfuzz as fuzz

    out = io.StringIO()
    tally = fuzz.run("portable", count=3, seed=0, out=out)
    text = out.getvalue()
    assert sum(tally.values()) == 3, text
    assert text.startswith("executorch-portable: aten.convolution.default(") and "(PASS unmutated)" in text, text
    assert all(key in fuzz.OUTCOMES.values() or key.startswith("killed by ") for key in tally), tally


def test_the_outcome_of_the_core_is_the_childs_exit_code():
    from backend_adapters.executorch_blobfuzz import OUTCOMES, _exit_code
    from conformance.case import Outcome
    from conformance.results import Category

    cases = {
        (Category.PASS, None): 0, (Category.MISMATCH, None): 1, (Category.INIT_FAIL, "init"): 10,
        (Category.CONTRACT_VIOLATION, "init"): 11, (Category.EXECUTE_FAIL, "execute"): 20,
        (Category.CONTRACT_VIOLATION, "execute"): 21, (Category.CONTRACT_VIOLATION, "destroy"): 30,
    }  # fmt: skip
    for (category, stage), code in cases.items():
        assert _exit_code(Outcome(category, stage=stage)) == code and code in OUTCOMES
