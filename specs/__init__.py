"""The spec of record (data, not code). This file only makes specs/ ship in the
wheel as the package ``conformance_specs``; ``conformance.specs`` is its reader."""
