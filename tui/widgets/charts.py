"""A time chart of one figure (textual-plotext): stretches of known readings as lines,
gaps left blank, the x axis in the span's unit."""

from __future__ import annotations

from textual_plotext import PlotextPlot

from tui.screens.nodeview import Chart


class HistoryChart(PlotextPlot):
    DEFAULT_CSS = """
    HistoryChart {
        height: 1fr;
        min-height: 5;
    }
    """

    def __init__(self, *, color: str = "cyan", xticks: bool = True, id: str | None = None) -> None:
        super().__init__(id=id)
        self.color = color
        # Charts stacked on one time axis: only the lowest needs its ticks, which leaves
        # the others a line more for the data at 80x24.
        self.xticks = xticks
        self.chart: Chart | None = None

    def draw(self, chart: Chart) -> None:
        """Replace what is drawn; unchanged data is not redrawn (the screen redraws often)."""
        if chart == self.chart:
            return
        self.chart = chart
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        plt.title(chart.title)
        plt.xlim(*chart.xlim)
        plt.ylim(*chart.ylim)
        plt.yfrequency(3)
        plt.xaxes(False, False)  # the tick labels alone mark the time axis
        if self.xticks:
            plt.xticks([x for x, _ in chart.ticks], [label for _, label in chart.ticks])
        else:
            plt.xticks([])
        for xs, ys in chart.lines:
            if len(xs) == 1:  # a lone slice between gaps: a dot, not a line
                plt.scatter(list(xs), list(ys), color=self.color, marker="braille")
            else:
                plt.plot(list(xs), list(ys), color=self.color, marker="braille")
        self.refresh()
