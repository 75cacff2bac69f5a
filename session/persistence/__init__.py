"""The persistence seam every backend shares: the public service (``SessionPersistence``), the
``Storage`` protocol a backend implements, and the generic coordinator that holds a storage."""
