"""Reports: pure rendering of runs already in memory (terminal tables, Markdown, HTML, SVG charts); every
number is formatted by report.fmt. Writing the rendered files is runs.rundir's job."""
