"""The private internals of hypothesis the harness uses, each behind a version check with a public fallback.

Tested on hypothesis 6.170 (6.170.15 and 6.170.17, the newest release): the project's tests and
checked-in reports, and a certification of the reference in ``core-fp32`` with every fallback forced
(tests/harness/test_compat.py). Outside ``TESTED`` (or with ``CONFORMANCE_COMPAT=public``) every
function here takes its public route.
"""

from __future__ import annotations

from collections.abc import Callable
from random import Random
from typing import Any, TypeVar

from conformance import compat

TESTED = ((6, 170), (6, 171))
"""The hypothesis releases the private routes were tested on: the 6.170 series."""

T = TypeVar("T")


class NoDraw(Exception):
    """A seeded draw gave nothing: the strategy rejected every choice it was given (a filter it never
    passes, ``reject()``, an argument it finds invalid)."""


_tested = compat.tested_range("hypothesis", *TESTED)


def _route(name: str, probe) -> bool:
    return compat.private_route("hypothesis", name, _tested, probe)


# ---------------------------------------------------------------------------------------------
# Draws that do not depend on the modules a process has loaded


def _probe_local_constants() -> str | None:
    from hypothesis.internal.conjecture import providers
    from hypothesis.internal.constants_ast import Constants  # noqa: F401

    if not callable(providers._get_local_constants):
        return "providers._get_local_constants is not a function"
    if "_get_local_constants" not in providers.HypothesisProvider._local_constants.func.__code__.co_names:
        return "HypothesisProvider._local_constants no longer calls providers._get_local_constants"
    draws = providers.HypothesisProvider._maybe_draw_constant.__code__.co_names
    if "_local_constants" not in draws or "GLOBAL_CONSTANTS" not in draws:
        return "HypothesisProvider._maybe_draw_constant no longer draws from _local_constants and GLOBAL_CONSTANTS"
    if not hasattr(providers.CONSTANTS_CACHE, "cache"):
        return "providers.CONSTANTS_CACHE has no cache"
    return None


def draw_only_global_constants() -> bool:
    """Make hypothesis draw from its fixed global constants only, never from constants of the modules this
    process happens to have loaded; True where that is in force. Idempotent.

    Hypothesis draws, with probability ~5%, a "local constant": one of the literals it scans out of every
    module loaded from outside site-packages and the standard library (the harness, the reference, a
    backend given by path, whatever a pytest-xdist worker imported for the checks it ran before). So a
    check's examples would depend on how the checks were spread over workers, i.e. on load, and a
    backend's own source could change what it is tested with. Hypothesis offers no switch for it
    (searched: its settings, environment variables and documentation, up to 6.170.17).

    Private route: ``hypothesis.internal.conjecture.providers._get_local_constants`` replaced by a function
    returning an empty pool, and the pools cached so far cleared. Tested on hypothesis 6.170.15 and
    6.170.17 (tests/harness/test_determinism.py: the same draws with and without a local module full of
    literals loaded).

    Public fallback: nothing changed (False). Every draw is still a valid input, judged the same way; what
    is lost is that a check draws the same examples in every process whatever it has imported."""
    if not _route("draw_only_global_constants", _probe_local_constants):
        return False
    from hypothesis.internal.conjecture import providers
    from hypothesis.internal.constants_ast import Constants

    if getattr(providers._get_local_constants, "_conformance_global_only", False):
        return True
    empty = Constants()

    def no_local_constants() -> Constants:
        return empty

    no_local_constants._conformance_global_only = True  # type: ignore[attr-defined]
    providers._get_local_constants = no_local_constants
    providers.CONSTANTS_CACHE.cache.clear()  # pools computed with local constants before now
    return True


# ---------------------------------------------------------------------------------------------
# One draw, seeded by a key


def _probe_conjecture_data() -> str | None:
    import inspect

    from hypothesis.control import BuildContext
    from hypothesis.internal.conjecture.data import ConjectureData

    parameters = inspect.signature(ConjectureData).parameters
    if "random" not in parameters or "max_choices" not in parameters:
        return "ConjectureData takes no random or max_choices"
    if not {"is_final", "wrapped_test"} <= set(inspect.signature(BuildContext).parameters):
        return "BuildContext takes no is_final or wrapped_test"
    return None


_REFUSED = ("StopTest", "UnsatisfiedAssumption", "Frozen", "InvalidArgument")
"""What a draw raises when its strategy rejects the choices it was given (a forced value the strategy
cannot build on, a filter it never passes): by name, as the engine's own exceptions are internal."""


def draw_seeded(build: Callable[[Callable[..., Any]], T], seed: int) -> T:
    """``build(draw)``, where ``draw(strategy)`` draws from a strategy with choices seeded by ``seed``: the
    same seed gives the same values in every process. ``NoDraw`` when the strategy rejects the choices.
    The directed draws of every NUM check (``conformance.strategies.directed``) are made so: a fixed edge
    set, whose unforced choices still vary from op to op.

    Private route: one ``hypothesis.internal.conjecture.data.ConjectureData`` over ``Random(seed)`` inside
    a ``hypothesis.control.BuildContext``, drawn from directly: one draw, no test engine. Tested on
    hypothesis 6.170.15 and 6.170.17 (tests/harness/test_directed.py).

    Public fallback: a ``@given(st.data())`` test seeded with ``@seed(seed)``, generating two examples and
    no other phase (settings: no database, no deadline, no health check); ``build`` runs on each and the
    second valid one is kept (the engine's first example is always its simplest one, the same for every
    seed). Deterministic by seed too, but other values than the private route's, and each draw runs the
    strategy twice under the engine (measured in docs/design.md, "Compatibility"). A strategy the engine
    finds invalid is retried by the engine, as in any @given test, before NoDraw."""
    if _route("draw_seeded", _probe_conjecture_data):
        from hypothesis.control import BuildContext
        from hypothesis.internal.conjecture.data import ConjectureData

        data = ConjectureData(random=Random(seed), max_choices=1_000_000)
        with BuildContext(data, is_final=True, wrapped_test=None):
            try:
                return build(data.draw)
            except BaseException as exc:
                if type(exc).__name__ in _REFUSED:
                    raise NoDraw(f"{type(exc).__name__}: {exc}") from None
                raise
    return _draw_seeded_public(build, seed)


def _draw_seeded_public(build: Callable[[Callable[..., Any]], T], seed: int) -> T:
    from hypothesis import HealthCheck, Phase, Verbosity, given, settings
    from hypothesis import seed as seeded
    from hypothesis import strategies as st
    from hypothesis.errors import HypothesisException, InvalidArgument, Unsatisfiable

    results: list[Any] = []
    invalid: list[BaseException] = []

    @seeded(seed)
    @settings(
        max_examples=2,
        phases=[Phase.generate],
        database=None,
        deadline=None,
        derandomize=False,
        print_blob=False,
        report_multiple_bugs=False,
        verbosity=Verbosity.quiet,
        suppress_health_check=list(HealthCheck),
    )
    @given(st.data())
    def drawing(data):
        if invalid:
            return
        try:
            results.append(build(data.draw))
        except InvalidArgument as exc:  # a forced argument the strategy refuses: no retry makes it valid
            invalid.append(exc)

    try:
        drawing()
    except Unsatisfiable as exc:
        if not results:
            raise NoDraw(f"Unsatisfiable: {exc}") from None
    except HypothesisException as exc:
        if type(exc).__name__ not in _REFUSED:
            raise
        raise NoDraw(f"{type(exc).__name__}: {exc}") from None
    if invalid and not results:
        raise NoDraw(f"InvalidArgument: {invalid[0]}")
    if not results:
        raise NoDraw("no valid example")
    return results[-1]


# ---------------------------------------------------------------------------------------------
# Small shortcuts


def _probe_just() -> str | None:
    from hypothesis import strategies as st
    from hypothesis.strategies._internal.misc import JustStrategy

    strategy = st.just(1)
    if type(strategy) is not JustStrategy or not hasattr(strategy, "value") or not hasattr(strategy, "_transformations"):
        return "st.just no longer gives a JustStrategy with value and _transformations"
    return None


def plain_just(strategy) -> tuple[bool, Any]:
    """(True, value) when ``strategy`` is a plain ``st.just(value)`` (no map or filter applied), else (False, None).

    The edge set's directives force most of a call through ``st.just``; a caller that knows the value
    gives it without a draw, which costs hypothesis a span of its own while choosing nothing (the choice
    sequence, hence every drawn value, stays the same).

    Private route: ``type(strategy) is hypothesis.strategies._internal.misc.JustStrategy`` and its
    ``_transformations`` empty. Tested on hypothesis 6.170.15 and 6.170.17.

    Public fallback: (False, None): every strategy is drawn (the same values, a span each)."""
    if not _route("plain_just", _probe_just):
        return False, None
    from hypothesis.strategies._internal.misc import JustStrategy

    if type(strategy) is JustStrategy and not strategy._transformations:
        return True, strategy.value
    return False, None


def _probe_database_key() -> str | None:
    from hypothesis.core import StateForActualGivenExecution

    if "_hypothesis_internal_database_key" not in StateForActualGivenExecution.run_engine.__code__.co_names:
        return "StateForActualGivenExecution.run_engine no longer reads _hypothesis_internal_database_key"
    return None


def without_database_key(test: Callable[..., Any]) -> Callable[..., Any]:
    """``test`` (a ``@given`` test run with ``database=None``) without an example-database key.

    Hypothesis makes a key for a test's examples by hashing its source (``inspect.getsource``, tokenize) on
    every run, even without a database to use it in: a NUM check runs one such test per op x dtype.

    Private route: ``test._hypothesis_internal_database_key = None``, which hypothesis reads instead of
    hashing. Tested on hypothesis 6.170.15 and 6.170.17.

    Public fallback: ``test`` unchanged (the key is computed and never used)."""
    if _route("without_database_key", _probe_database_key):
        test._hypothesis_internal_database_key = None  # type: ignore[attr-defined]
    return test
