"""A class on JupyterHub (`make hub`): the roster of course.yml, sandboxed student servers with CPU and
memory limits, nbgrader's exchange with one folder per student, and the kit's grading. docs/hub.md."""
