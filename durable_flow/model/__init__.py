"""The graph model: blackboard, reducers, messages, graph, conditions, routing, records. No I/O."""
