"""Deadlines, bounded close() and leak checks (tasks, sockets) of Producer, Consumer, Admin."""
