"""Executing a run and the command bodies that read runs: fan-out with progress (engine) and the run's
garbage-collector policy (collector), `prbj judge` (execute, command), `prbj report`/`check` (report_command),
`prbj correlate`/`downstream` (downstream_command), and the run directory (rundir), the only module that names,
writes and reads its files."""
