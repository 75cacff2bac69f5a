"""The persistence seam every store shares.

Public: :mod:`session.persistence.service` (``SessionPersistence``, the service a runtime
installs), :mod:`session.persistence.api` (the values it returns),
:mod:`session.persistence.storage` (the ``Storage`` base class a backend derives from),
:mod:`session.persistence.kit` (everything a backend imports, in one module) and
:mod:`session.persistence.memory` (a store in memory, for tests). The other modules are
internal.
"""
