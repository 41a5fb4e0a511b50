"""Message bridges: carry a channel and its payloads from one encoding to another (ROS 1 <-> ROS 2, ULog <-> ROS 1)."""
