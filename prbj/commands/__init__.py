"""The click commands of `prbj`, one module per command or command family."""
