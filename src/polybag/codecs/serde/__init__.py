"""Serializers generated from the type system: the ROS 1 and CDR (ROS 2) wire formats.

Above the type system (:mod:`polybag.codecs.type_set`, :mod:`polybag.codecs.ros2`) and below
the codecs (:mod:`polybag.codecs.ros1`, :mod:`polybag.codecs.cdr`), as rosbags' ``serde``:
:mod:`~polybag.codecs.serde.compiler` (one :class:`~polybag.codecs.serde.compiler.Compiler`
per type set, wire and byte order) has :mod:`~polybag.codecs.serde.decoders` and
:mod:`~polybag.codecs.serde._encoders` write each type's function
(:mod:`~polybag.codecs.serde._generator`: what both share) and builds the message classes of
:mod:`~polybag.codecs.serde.messages`.  The package imports none of its modules.
"""
