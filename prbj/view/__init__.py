"""`prbj view`: the web viewer. Pages over run directories read through runs.rundir (routes in `server`, page
content in `overview`, `table`, `pair` and `sheets`, Jinja2 templates and static assets shipped in the package,
the static bundle in `bundle`); the only files it writes are labels.jsonl and filled annotation sheets."""
