"""Bytes: local, streamed and remote sources, transports by URL scheme, uploads, bounded
decompression.  This layer knows no format (a format says what it needs through the
registry's hooks and its writer's class).

- :mod:`~polybag.io.source`: the :class:`~polybag.io.source.Source` protocol (``need``,
  ``need_many``, ``need_all``, ``hint``); mapped files and buffers, forward-only streams
- :mod:`~polybag.io.remote`: open a URL as a source, read its head, download it, expand a glob
- :mod:`~polybag.io.remote_source`: a remote object as a source filled by range requests
  (:mod:`~polybag.io.block_map`: which blocks are here; :mod:`~polybag.io.read_ahead`: what is
  fetched before it is asked for)
- :mod:`~polybag.io.transports`: which transport reads a URL, by scheme
  (:mod:`~polybag.io.http_ranges`, :mod:`~polybag.io.gcs`, else fsspec:
  :mod:`~polybag.io.fsspec_transport`)
- :mod:`~polybag.io.http_ranges`: byte ranges over ``http.client``, through
  :mod:`~polybag.io.http_requests` (requests about one object), :mod:`~polybag.io.http_connections`
  (connections under deadlines), :mod:`~polybag.io.http_answers` (headers, the object's version,
  multipart framing), :mod:`~polybag.io.redirects` (which redirects are followed, for aiohttp too)
- :mod:`~polybag.io.remote_limits`: deadlines and sizes; :mod:`~polybag.io.redaction`: URLs and
  secrets in messages
- :mod:`~polybag.io.urls`: what a target string is (a URL, a ``file://`` path)
- :mod:`~polybag.io.upload`: outputs at URLs, staged locally and uploaded
- :mod:`~polybag.io.compression`: chunk codecs with bounded output, CRC-32
"""
