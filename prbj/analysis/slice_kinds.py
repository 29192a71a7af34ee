"""The names of the slices accuracy can be cut by: apart from prbj.analysis.slices so that the command line can
offer them without importing the table library."""

SLICE_KINDS: tuple[str, ...] = ("profile-posts", "profile-tokens", "length-diff", "subset", "aspects")
