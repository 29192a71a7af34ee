"""What prbj's HTTP servers share: who may talk to them (prbj.web.access)."""

# Here rather than in prbj.web.access: the CLI names it in `prbj serve --help`, which every command builds.
SERVE_TOKEN_ENV = "PRBJ_SERVE_TOKEN"
