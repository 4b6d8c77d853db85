"""``list``: the backends found, the profiles, and the spec'd ops."""

from __future__ import annotations

import argparse

from conformance.cli.exits import EXIT_OK, UsageError
from conformance.cli.inputs import load_specs


def list_command(ns: argparse.Namespace) -> int:
    """Backends (entry points), profiles (with what they hold), and with --ops every spec'd op."""
    from conformance import specs as spec_module
    from conformance.discovery import DiscoveryError, available, entry_points

    specs = load_specs()
    if ns.ops:
        for name, spec in sorted(specs.ops.items()):
            print(
                f"{name:44s} {'core ' if spec.core else '     '}{','.join(spec.dtypes)}"
                + (f"  (also {', '.join(spec.edge)})" if spec.edge else "")
            )
        return EXIT_OK
    try:
        found = available()
    except DiscoveryError as exc:
        raise UsageError(str(exc)) from None
    print("backends (python -m conformance certify NAME):")
    for name in found:
        print(f"  {name:40s} {entry_points()[name].value}")
    print("profiles (--profile NAME):")
    for name, profile in specs.profiles.items():
        pairs = sum(len(d) for d in profile.dtypes.values())
        print(
            f"  {name:14s} {len(profile.clauses):3d} clauses, {len(profile.ops):3d} ops, {pairs:4d} op x dtype, "
            f"{len(profile.models):2d} models, {len(profile.quantized):2d} quantized  {profile.description}"
        )
    print(f"  {spec_module.CLAIMED:14s} the contract clauses plus exactly the ops and dtypes the backend's manifest claims")
    print("  FILE.toml[:NAME]  a profiles file of your own, in specs/profiles.toml's format (may extend the profiles above)")
    print("narrow any profile with --ops aten.add.*,*conv* and --dtypes float32,int32; `list --ops` lists the ops")
    return EXIT_OK
