"""Reports: terminal tables now; Markdown, HTML and plots build on the same summary rows."""
