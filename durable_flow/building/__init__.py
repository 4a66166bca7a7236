"""Building workflows: the builder, validation, the data-flow check, diagrams, the declarative format."""
