"""tools/check_setup_deps.py's parts: Debian's packages, what a build read, what a bench script needs."""
