"""Live robot middleware transports (no ROS installation needed).

:mod:`polybag.net.ros1` speaks ROS 1 (master XML-RPC API, slave API, TCPROS) in pure Python.
"""
