"""Fitted estimators say what they hold: widths, landmarks, state size, dtypes; scikit-learn's repr otherwise."""

import re

import dask.array as da
import numpy as np
import scipy.sparse as sp
from sklearn import config_context
from sklearn.base import clone
from sklearn.linear_model import Ridge
from sklearn.pipeline import make_pipeline

import dkapprox
from dkapprox.kernel_approximation import AdditiveChi2Sampler, RBFSampler
from dkapprox.nystroem import Nystroem
from dkapprox.random_projection import GaussianRandomProjection, SparseRandomProjection
from dkapprox.utils import format_size

X = np.random.default_rng(0).random((200, 8))


def test_unfitted_repr_is_scikit_learns():
    assert repr(RBFSampler(n_components=20, random_state=0)) == "RBFSampler(n_components=20, random_state=0)"
    assert repr(Nystroem()) == "Nystroem()"


def test_fitted_repr_adds_widths_and_state_size():
    est = RBFSampler(n_components=20, random_state=0).fit(X)
    nbytes = est.random_weights_.nbytes + est.random_offset_.nbytes
    assert nbytes == 8 * 8 * 20 + 8 * 20
    assert repr(est) == (f"RBFSampler(n_components=20, random_state=0)  # fitted: 8 -> 20 features, "
                         f"state {format_size(nbytes)}")
    assert "landmarks" not in repr(est)
    small = RBFSampler(n_components=2, random_state=0).fit(X[:, :1])
    assert repr(small).endswith("# fitted: 1 -> 2 features, state 32 B")


def test_nystroem_shows_its_landmarks():
    est = Nystroem(n_components=50, random_state=0).fit(X)
    # the state transform ships: landmarks and normalization (the landmarks' row indices stay on the driver)
    nbytes = est.components_.nbytes + est.normalization_.nbytes
    assert nbytes == 8 * 50 * 8 + 50 * 50 * 8
    assert repr(est).endswith(f"# fitted: 8 -> 50 features, 50 landmarks, state {format_size(nbytes)}")


def test_projections_have_components_but_no_landmarks():
    assert "landmarks" not in repr(GaussianRandomProjection(n_components=3, random_state=0).fit(X))
    srp = SparseRandomProjection(n_components=3, density=1 / 3, random_state=0).fit(X)
    c = srp.components_
    assert sp.issparse(c)
    assert repr(srp).endswith(f"state {c.data.nbytes + c.indices.nbytes + c.indptr.nbytes} B")


def test_large_states_in_mib_and_stateless_estimators():
    big = RBFSampler(n_components=4096, random_state=0).fit(np.ones((2, 300)))
    assert repr(big).endswith("# fitted: 300 -> 4096 features, state 9.41 MiB")
    assert repr(AdditiveChi2Sampler().fit(X)).endswith("# fitted: 8 -> 24 features, state 0 B")


def test_repr_evaluates_back_to_the_same_parameters():
    est = RBFSampler(gamma=0.5, n_components=20, random_state=0).fit(X)
    again = eval(repr(est), {"RBFSampler": RBFSampler})  # the note is a comment
    assert again.get_params() == est.get_params()


def test_clone_and_pipelines_keep_plain_reprs():
    est = Nystroem(n_components=10, random_state=0).fit(X)
    assert repr(clone(est)) == "Nystroem(n_components=10, random_state=0)"
    pipe = make_pipeline(RBFSampler(n_components=5, random_state=0), Ridge()).fit(X, X[:, 0])
    assert "#" not in repr(pipe)  # nested estimators are printed by scikit-learn's own printer


def _note(page):
    """The dkapprox note of an HTML repr: its summary line and its table as {label: text}."""
    note = page[page.index("<div class='dkapprox-fitted'>"):]
    note = note[:note.index("</div>") + len("</div>")]
    summary = re.search(r"<summary>(.*?)</summary>", note)[1]
    rows = dict(re.findall(r"<th[^>]*>(.*?)</th><td[^>]*>(.*?)</td>", note))
    return note, summary, rows


def test_jupyter_shows_the_note_in_html_and_text():
    est = dkapprox.RBFSampler(n_components=20, random_state=0).fit(X)
    with config_context(display="diagram"):
        bundle = est._repr_mimebundle_()
        html = est._repr_html_()
    for page in (bundle["text/html"], html):  # each call numbers its container anew
        note, summary, rows = _note(page)
        # inside the body where scikit-learn's page has one (>= 1.7), else after its last element
        assert note + "</body>" in page if "</body>" in page else page.endswith(note)
        assert summary == "fitted: 8 -&gt; 20 features, state 1.41 kiB"
        # fitted on float64, as scikit-learn's: float32 input meets float64 weights
        assert rows == {"state shipped to the workers": "1,440 bytes (1.41 kiB), one graph key",
                        "dtype": "fitted arrays float64; float32 in, float64 out; float64 in, float64 out"}
    assert est.transform(X.astype(np.float32)).dtype == np.float64
    assert bundle["text/plain"] == repr(est)
    assert "dkapprox-fitted" not in RBFSampler()._repr_mimebundle_()["text/html"]


def test_html_names_the_landmark_method_passes_bytes_and_dtype():
    X32 = da.from_array(X.astype(np.float32), chunks=50)
    for landmarks, passes in (("uniform", "1 pass"), ("kmeans", "5 passes"), ("leverage", "2 passes")):
        est = Nystroem(n_components=20, landmarks=landmarks, random_state=0).fit(X32)
        _, summary, rows = _note(est._repr_html_())
        nbytes = 20 * 8 * 4 + 20 * 20 * 4  # float32 landmarks and normalization
        assert summary == f"fitted: 8 -&gt; 20 features, 20 landmarks, state {format_size(nbytes)}"
        assert rows == {"state shipped to the workers": f"{nbytes:,} bytes ({format_size(nbytes)}), one graph key",
                        "dtype": "fitted arrays float32; float32 in, float32 out; float64 in, float64 out",
                        "landmarks": f"{landmarks}: 20 rows, chosen in {passes} over the data"}
        assert est.transform(X32).dtype == np.float32 and est.transform(X).dtype == np.float64
    given = Nystroem(n_components=3, landmarks=X[:3], random_state=0).fit(X)
    assert _note(given._repr_html_())[2]["landmarks"] == "given array: 3 rows, chosen in 0 passes over the data"
    chi2 = _note(AdditiveChi2Sampler().fit(X)._repr_html_())[2]
    assert chi2["dtype"] == "no fitted arrays; float32 in, float32 out; float64 in, float64 out"
    assert chi2["state shipped to the workers"] == "0 bytes (0 B), one graph key"
