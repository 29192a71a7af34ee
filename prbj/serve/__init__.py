"""The HTTP reward server and its client."""
