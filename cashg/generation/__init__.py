"""``cashg generate``: handwriting for a text in a writer's style."""
