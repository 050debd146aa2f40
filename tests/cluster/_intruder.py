"""Someone without the cluster's credentials knocks on a scheduler's port: what happens (issue 39).

Three visitors, each speaking dask's own protocol (``distributed.comm.connect`` and an ``identity``
request, what a Client sends first): plain TCP; TLS without a client certificate; TLS with a
certificate of their own (``Security.temporary``). ``knock`` returns '' when the scheduler answered,
else the error that stopped the visitor. (distributed.Client is not used: a Client that failed to
connect can be garbage-collected inside the next Client's start and deadlock it, distributed's
LoopRunner lock not being reentrant.)
"""

from __future__ import annotations

import asyncio
import ssl


async def _knock(address, connection_args):
    from distributed.comm import connect

    comm = await connect(address, timeout=3, **connection_args)
    try:
        await comm.write({"op": "identity", "reply": True})
        await asyncio.wait_for(comm.read(), 3)
        return ""
    finally:
        comm.abort()


def knock(address, connection_args=None) -> str:
    try:
        return asyncio.run(_knock(address, connection_args or {}))
    except Exception as exc:  # noqa: BLE001 (every way in which the visitor is stopped is a refusal)
        return f"{type(exc).__name__}: {exc}" or type(exc).__name__


def visitors(address) -> dict:
    """What plain TCP, certificate-less TLS and a stranger's TLS get from the scheduler at a tls:// address."""
    from distributed.security import Security

    anonymous = ssl.create_default_context()
    anonymous.check_hostname, anonymous.verify_mode = False, ssl.CERT_NONE  # trusts the server, shows no cert
    stranger = Security.temporary().get_connection_args("client")
    return {"plain tcp": knock("tcp://" + address.removeprefix("tls://")),
            "tls without a certificate": knock(address, {"ssl_context": anonymous}),
            "tls with a stranger's certificate": knock(address, stranger)}
