"""What prbj prints on a terminal or into a log: the output's width and the one table renderer that fits it.
Every command prints its tables through here, whatever layer it lives in."""
