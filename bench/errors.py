"""The one error a condition raises for a cause its user can fix (a place not given, input not
there): the driver prints it as one line and exits 1."""


class BenchError(Exception):
    pass
