"""离线网页：在本机 127.0.0.1 上提供 site/（网页里的 Python 需要通过 http 打开，不能直接双击 html 文件）。

用法：python site.py [--port 端口] [--no-browser]。只需要 Python，不需要联网。按 Ctrl+C 停止。
"""

import argparse
import functools
import http.server
import json
import os
import sys
import webbrowser
from pathlib import Path

HERE = Path(__file__).resolve().parent
SITE = HERE / "site"
PAGE = json.loads((HERE / "bundle.json").read_text(encoding="utf-8"))["page"]


def has_display():
    return not sys.platform.startswith("linux") or bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def main(argv=None):
    parser = argparse.ArgumentParser(description="serve the offline course site on 127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="端口（默认：任意一个空闲端口）")
    parser.add_argument("--no-browser", action="store_true", help="不自动打开浏览器")
    args = parser.parse_args(argv)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(SITE))
    handler.extensions_map = {**handler.func.extensions_map, ".mjs": "text/javascript", ".wasm": "application/wasm"}
    with http.server.ThreadingHTTPServer(("127.0.0.1", args.port), handler) as server:
        url = f"http://127.0.0.1:{server.server_address[1]}/{PAGE}"
        print(f"离线网页： {url}  （按 Ctrl+C 停止）", flush=True)
        if not args.no_browser and has_display():
            webbrowser.open(url)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
    return 0

if __name__ == "__main__":
    sys.exit(main())
