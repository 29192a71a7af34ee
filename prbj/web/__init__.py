"""What prbj's HTTP servers share: who may talk to them (prbj.web.access)."""
