"""A stand-in for NVIDIA's dcgm-exporter: an HTTP server in a thread serving /metrics in
its text exposition format (names, labels and units of its default-counters.csv: FB in
MiB, power in W, clocks in MHz), with values that change at every scrape, each scrape's
values kept so that a test can check what was read back against what was served."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HELP = {
    "DCGM_FI_DEV_GPU_UTIL": ("gauge", "GPU utilization (in %)."),
    "DCGM_FI_DEV_MEM_COPY_UTIL": ("gauge", "Memory utilization (in %)."),
    "DCGM_FI_DEV_FB_USED": ("gauge", "Framebuffer memory used (in MiB)."),
    "DCGM_FI_DEV_FB_FREE": ("gauge", "Framebuffer memory free (in MiB)."),
    "DCGM_FI_DEV_GPU_TEMP": ("gauge", "GPU temperature (in C)."),
    "DCGM_FI_DEV_POWER_USAGE": ("gauge", "Power draw (in W)."),
    "DCGM_FI_DEV_SM_CLOCK": ("gauge", "SM clock frequency (in MHz)."),
    "DCGM_FI_DEV_XID_ERRORS": ("gauge", "Value of the last XID error encountered."),
}
UTILS = (10, 30, 50, 70, 90)  # GPU utilisation served, one a scrape in turn


@dataclass
class DcgmExporter:
    hostname: str
    gpus: int = 2
    port: int = 0
    served: list[int] = field(default_factory=list)  # GPU 0's utilisation, each scrape
    _server: ThreadingHTTPServer | None = None

    def metrics(self) -> str:
        util = UTILS[len(self.served) % len(UTILS)]
        self.served.append(util)
        lines: list[str] = []
        for name, (kind, text) in HELP.items():
            lines += [f"# HELP {name} {text}", f"# TYPE {name} {kind}"]
            for gpu in range(self.gpus):
                labels = (
                    f'gpu="{gpu}",UUID="GPU-5fd4c8a2-{gpu:04d}",device="nvidia{gpu}",'
                    f'modelName="NVIDIA H100 80GB HBM3",Hostname="{self.hostname}",'
                    'DCGM_FI_DRIVER_VERSION="550.54.15"'
                )
                value = {
                    "DCGM_FI_DEV_GPU_UTIL": util + gpu,
                    "DCGM_FI_DEV_MEM_COPY_UTIL": util // 2,
                    "DCGM_FI_DEV_FB_USED": 40000 + util,
                    "DCGM_FI_DEV_FB_FREE": 41559 - util,
                    "DCGM_FI_DEV_GPU_TEMP": 40 + util // 5,
                    "DCGM_FI_DEV_POWER_USAGE": 100 + util * 5.5,
                    "DCGM_FI_DEV_SM_CLOCK": 1980,
                    "DCGM_FI_DEV_XID_ERRORS": 0,
                }[name]
                lines.append(f"{name}{{{labels}}} {value}")
        return "\n".join(lines) + "\n"

    def start(self) -> DcgmExporter:
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.split("?")[0] != "/metrics":
                    self.send_error(404)
                    return
                body = exporter.metrics().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
