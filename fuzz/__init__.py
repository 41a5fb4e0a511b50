"""polybag's fuzz harness: ``python -m fuzz --target NAME --seconds 3600`` (see README.md).

The invariant every target checks on every case: only :class:`polybag.errors.PolybagError`
comes out of the API, the case ends within its time bound, and memory stays under a bound
that does not depend on the sizes the input declares.
"""
