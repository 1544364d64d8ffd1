"""matplotlib's pyplot for the report's figures, imported only when a figure is drawn."""


def pyplot():
    """matplotlib's pyplot on the file-only backend (no display needed), imported only when plotting."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
