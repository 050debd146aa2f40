"""moto's S3 server, each object write and delete atomic as S3's are: ``python _moto_atomic.py -H HOST -p PORT``.

S3 evaluates a conditional write (``If-None-Match: *``, ``If-Match: <ETag>``) atomically with the
write: of several PUTs racing to create one key, exactly one succeeds. moto 5's threaded server
checks the condition, then writes, with nothing between the two: two PUTs that both checked before
either wrote both succeed. dkapprox's store lease relies on S3's guarantee (dkapprox/io/_lease.py),
and tests/io/test_lease.py's race of four processes won twice against moto under load (seen on
Python 3.11 and 3.13). Here every PUT and DELETE of an object runs under one lock, which gives the
server S3's semantics; reads stay concurrent. Everything else is moto's own ``moto.server``.
"""

import sys
import threading

from moto.s3.responses import S3Response
from moto.server import main

_lock = threading.Lock()


def _atomic(method):
    def run(self, *args, **kwargs):
        with _lock:
            return method(self, *args, **kwargs)

    run.__name__ = method.__name__
    return run


S3Response.put_object = _atomic(S3Response.put_object)
S3Response.delete_object = _atomic(S3Response.delete_object)

if __name__ == "__main__":
    main(sys.argv[1:])
