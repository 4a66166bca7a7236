"""The superstep engine: the loop of one thread, tasks, the node context, state views, fork."""
