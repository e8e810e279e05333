"""A TCP relay for the chaos tests: ``python -m tests.chaos.relay --port P --target host:port``
listens on 127.0.0.1:P and copies bytes both ways to ``target``. Killing it (by PID) makes the
target unreachable through it — the way a database behind a network path goes away — without
touching the shared server behind it."""

from __future__ import annotations

import argparse
import asyncio


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


async def _serve(port: int, host: str, target_port: int) -> None:
    async def handle(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        try:
            tr, tw = await asyncio.open_connection(host, target_port)
        except OSError:
            w.close()
            return
        await asyncio.gather(_pipe(r, tw), _pipe(tr, w))

    server = await asyncio.start_server(handle, "127.0.0.1", port)
    async with server:
        await server.serve_forever()


def main() -> None:
    """Parse ``--port`` and ``--target`` and relay until killed."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--target", required=True, help="host:port")
    a = ap.parse_args()
    host, _, port = a.target.rpartition(":")
    asyncio.run(_serve(a.port, host, int(port)))


if __name__ == "__main__":
    main()
