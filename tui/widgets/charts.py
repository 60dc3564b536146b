"""A time chart of one figure (textual-plotext): stretches of known readings as lines,
gaps left blank, the x axis in the span's unit."""

from __future__ import annotations

from rich.cells import cell_len
from rich.text import Text
from textual.app import RenderResult
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

    def render(self) -> RenderResult:
        drawn = super().render()
        if not isinstance(drawn, Text) or self.chart is None:
            return drawn
        if cell_len(self.chart.title) == len(self.chart.title):
            return drawn  # (English: a character a cell, as plotext lays it out)
        return fit_lines(drawn, self.size.width)


def fit_lines(drawn: Text, width: int) -> Text:
    """plotext lays a title out a character a cell: a Chinese character, two cells, pushes
    its line past the width (wrapped, the title on two lines). The line's padding gives
    the cells back, its trailing spaces first; what is still too wide is cut."""
    out = []
    for line in drawn.split("\n", allow_blank=True):
        over = line.cell_len - width
        if over > 0:
            plain = line.plain
            trailing = min(over, len(plain) - len(plain.rstrip(" ")))
            line = line[: len(plain) - trailing]
            over -= trailing
            leading = min(over, len(plain) - len(plain.lstrip(" ")))
            line = line[leading:]
            if line.cell_len > width:
                line.truncate(width, overflow="ellipsis")
        out.append(line)
    return Text("\n").join(out)
