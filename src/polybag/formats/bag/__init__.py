"""ROS 1 bags: every version read (``#ROSBAG V2.0``, ``#ROSRECORD V1.2/V1.1``, ``#ROSLOG
V1.1/V1.0``, version 0), version 2.0 written, reindexed, checked and recompressed.

``reader.open_bag`` is the opener :func:`polybag.open` uses; ``writer.BagWriter`` is what
``polybag.Writer("x.bag")`` returns.  A connection is a :class:`~polybag.model.Channel`
with message encoding ``ros1``; its schema is ``Schema(name=type, encoding="ros1msg",
data=message_definition)``; ``channel.metadata`` holds ``md5sum``, ``type`` and, when the
connection header has them, ``callerid`` and ``latching``.
"""
