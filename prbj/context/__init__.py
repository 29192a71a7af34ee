"""What a judge is shown: retrieval of profile posts, the planner, the context builder."""
