"""Bytes: local, streamed and remote sources, transports by URL scheme, uploads, bounded decompression."""
