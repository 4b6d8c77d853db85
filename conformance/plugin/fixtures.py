"""What a check is given: ``backend`` (parametrized over ``--conformance-backend``, id = the name,
marker ``backend_<name>``), ``specs``, ``profile`` and its ``result`` recorder; and a clause that
the backend's family or manifest rules out is NOT_APPLICABLE before the check runs."""

from __future__ import annotations

import pytest

from conformance.plugin.capture import RECORDER, ResultRecorder
from conformance.plugin.items import clause_of, marker_name
from conformance.plugin.session import active, state


def pytest_generate_tests(metafunc):
    config = metafunc.config
    if not active(config) or "backend" not in metafunc.fixturenames:
        return
    names = config.getoption("conformance_backend")
    metafunc.parametrize(
        "backend",
        [pytest.param(n, id=n, marks=getattr(pytest.mark, f"backend_{marker_name(n)}")) for n in names],
        indirect=True,
        scope="session",
    )


@pytest.fixture(scope="session")
def backend(request):
    """The BackendUnderTest of this check (parametrized over --conformance-backend)."""
    from conformance.discovery import DiscoveryError

    try:
        return state(request.config).backend(request.param)
    except DiscoveryError as exc:
        pytest.exit(str(exc), returncode=2)


@pytest.fixture(scope="session")
def specs(request):
    return state(request.config).specs


@pytest.fixture(scope="session")
def profile(request):
    return state(request.config).profile


@pytest.fixture
def result(request):
    """The recorder of this check's result."""
    return request.node.stash.setdefault(RECORDER, ResultRecorder(clause_of(request.node)))


@pytest.fixture(autouse=True)
def _clause_applies(request):
    """NOT_APPLICABLE, with the reason, for a clause the backend's family or manifest rules out."""
    if not active(request.config) or "backend" not in request.fixturenames:
        return
    clause = clause_of(request.node)
    if clause is None:
        return
    backend = request.getfixturevalue("backend")
    recorder = request.getfixturevalue("result")
    spec = state(request.config).specs.clauses.get(clause)
    if spec is not None and backend.family not in spec.applies_to:
        why = backend.manifest.not_applicable_reason(clause)  # the family's reason, when its adapter gives one
        recorder.not_applicable(
            f"{clause} applies to {', '.join(spec.applies_to)} backends; {backend.name} is a {backend.family} backend"
            + (f": {why}" if why else "")
        )
    reason = backend.manifest.not_applicable_reason(clause)
    if reason:
        recorder.not_applicable(reason)
