"""File formats.  Each subpackage has a reader (a :class:`polybag.reader.Reader`) and a writer."""
