"""The Textual dashboard."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Footer, Header

from leases.ledger import Ledger


class ZukaApp(App[None]):
    TITLE = "zuka 租卡"
    BINDINGS: ClassVar[list[Binding]] = [Binding("q", "quit", "Quit", id="quit")]

    def __init__(self, ledger_path: Path | None) -> None:
        super().__init__()
        self.ledger_path = ledger_path

    def compose(self) -> ComposeResult:
        yield Header()
        yield DataTable(id="nodes", cursor_type="row")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#nodes", DataTable)
        table.add_columns("Node", "Channel", "Provider", "GPUs", "Billing", "Price", "Ends")
        with Ledger.open(self.ledger_path, create=False) as ledger:
            channels = {p.name: p.kind.value for p in ledger.providers()}
            current = {le.node: le for le in ledger.leases(open_only=True)}
            for n in ledger.nodes():
                le = current.get(n.name)
                table.add_row(
                    n.name,
                    channels.get(n.provider or "", "-"),
                    n.provider or "-",
                    f"{n.gpu_count}x {n.gpu_model}",
                    le.billing_type.value if le else "-",
                    f"{le.unit_price} {le.currency}" if le else "-",
                    le.end.strftime("%Y-%m-%d") if le and le.end else "-",
                    key=n.name,
                )
        self.sub_title = f"{table.row_count} nodes"


def run_dashboard(ledger_path: Path | None) -> int:
    ZukaApp(ledger_path).run()
    return 0
