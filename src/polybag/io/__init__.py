"""Bytes: local, streamed and remote sources, transports by URL scheme, uploads, bounded
decompression.  This layer knows no format (a format says what it needs through the
registry's hooks and its writer's class).

- :mod:`~polybag.io.source`: the :class:`~polybag.io.source.Source` protocol (``need``,
  ``need_many``, ``need_all``, ``hint``); mapped files and buffers, forward-only streams
- :mod:`~polybag.io.remote`: a remote object as a source filled by range requests
- :mod:`~polybag.io.transports`: which transport reads a URL, by scheme
  (:mod:`~polybag.io.http`, :mod:`~polybag.io.gcs`, else fsspec)
- :mod:`~polybag.io.urls`: what a target string is (a URL, a ``file://`` path)
- :mod:`~polybag.io.upload`: outputs at URLs, staged locally and uploaded
- :mod:`~polybag.io.compression`: chunk codecs with bounded output, CRC-32
"""
