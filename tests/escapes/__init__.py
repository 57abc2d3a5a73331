"""Ways out of a contained Run, each tried from inside a real one (real bwrap,
the real daemon, a shell agent) as a prompt-injected agent with a shell would:
each must fail, and the Run's own work must still land on its branch."""
