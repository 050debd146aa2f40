"""The input listing an output store keeps: named by its digest only once its bytes are written."""

import numpy as np
import zarr

from dkapprox.io._identity import (
    LISTING,
    InputIdentity,
    has_listing,
    identify,
    listing_digest,
    load_listing,
    save_listing,
)
from dkapprox.io._location import locate


def _identities(tmp_path):
    source = zarr.create_array(str(tmp_path / "x.zarr"), shape=(10, 2), chunks=(5, 2), dtype="f8")
    source[...] = np.arange(20.0).reshape(10, 2)
    return [identify(source, locate(str(tmp_path / "x.zarr")))]


def test_a_listing_whose_bytes_were_never_written_is_not_kept(tmp_path):
    identities = _identities(tmp_path)
    assert isinstance(identities[0], InputIdentity)
    group = zarr.open_group(str(tmp_path / "out.zarr"), mode="w")
    # a file where the listing's chunks go: writing its bytes fails, as a run killed between the array's
    # metadata and its bytes would leave it
    (tmp_path / "out.zarr" / LISTING).mkdir()
    (tmp_path / "out.zarr" / LISTING / "c").write_text("not a folder")
    digest = listing_digest(identities)
    try:
        save_listing(group, identities)
    except OSError:
        pass
    else:
        raise AssertionError("writing the listing's bytes should have failed")
    assert LISTING in group and not has_listing(group, digest)  # so the rerun writes it again
    assert load_listing(group, digest) is None
    (tmp_path / "out.zarr" / LISTING / "c").unlink()
    save_listing(group, identities)
    assert has_listing(group, digest)
    assert [i.digest for i in load_listing(group, digest)] == [i.digest for i in identities]
