"""What prbj's HTTP servers share: who may talk to them (prbj.web.access), and how long a client may take."""

# Where `prbj serve` reads its token from (--token's default), and where its client finds the token to send.
# Here rather than in prbj.web.access: the CLI names it in `prbj serve --help`, which every command builds.
SERVE_TOKEN_ENV = "PRBJ_SERVE_TOKEN"
# A connection with no request in progress (or a request whose headers never end) is closed after IDLE_TIMEOUT,
# and a request body must arrive within READ_TIMEOUT: a slow or stalled client must not pin a connection (or a
# handler) forever. Both servers (`prbj serve`, `prbj view`) take these.
IDLE_TIMEOUT = 60.0
READ_TIMEOUT = 60.0
