"""What prbj's HTTP servers share: who may talk to them (prbj.web.access)."""

# Where `prbj serve` reads its token from (--token's default), and where its client finds the token to send.
# Here rather than in prbj.web.access: the CLI names it in `prbj serve --help`, which every command builds.
SERVE_TOKEN_ENV = "PRBJ_SERVE_TOKEN"
