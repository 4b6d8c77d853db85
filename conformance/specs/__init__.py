"""The spec of record, loaded into frozen dataclasses. The only reader of specs/.

specs/interface.toml   contract clauses with stable IDs
specs/ops/*.toml       operator specs, one file per family
specs/models.toml      models of the MOD clauses (conformance/programs/models.py builds them)
specs/quantized.toml   quantized int8 programs of the QNT clauses (conformance/programs/quantize.py builds them)
specs/profiles.toml    certification profiles
specs/scope.toml       core ATen overloads no NUM check certifies, each with the reason

The records and the vocabulary of the files are in ``model``; ``validation`` checks each file
against its JSON Schema (``schemas/``); ``loading`` reads specs/ into a ``Specs``; ``profiles``
holds the profile operations. A broken spec file is refused with a message naming the file, the
table path and the field, what is wrong and what is accepted. Each module's ``__all__`` is its
part of this package's names.
"""

from conformance.specs import loading, model, profiles, validation
from conformance.specs.loading import *  # noqa: F403
from conformance.specs.model import *  # noqa: F403
from conformance.specs.profiles import *  # noqa: F403
from conformance.specs.validation import *  # noqa: F403

__all__ = []
__all__ += model.__all__
__all__ += validation.__all__
__all__ += profiles.__all__
__all__ += loading.__all__
