"""Progress where the user is: a widget in Jupyter, a bar on a terminal, nothing when piped.

Every compute dkapprox starts over the data (a fit's passes: k-means and
leverage landmarks, ``gamma='scale'``, the ridge learners' statistics; and
:func:`dkapprox.io.write_features`) goes through :func:`compute`, and so can
a compute the user starts (``dkapprox.compute(Z)``). Where it is shown:

- in a Jupyter kernel: a widget (distributed's own under a distributed
  client, else an ``ipywidgets`` bar updated by a dask callback); text in the
  cell's output when ``ipywidgets`` is not installed;
- on a terminal (stderr is a TTY): a text bar on stderr, as the command line
  draws it (distributed's under a client, else dask's ``ProgressBar``);
- anywhere else (piped, a log file, a worker, a test run): nothing.

Shown only for computes that last longer than :data:`MINIMUM_SECONDS`, so the
short passes of a small fit do not flicker, and only from the main thread.
A bar the user already opened (``with dask.diagnostics.ProgressBar():``) is
left alone: no second one. The one switch is the environment variable
``DKAPPROX_PROGRESS``, read at every compute (``%env DKAPPROX_PROGRESS=0`` in
a notebook): ``0`` turns progress off, ``1`` shows it at once even where no
one seems to watch (text on stderr when there is no kernel), unset or
``auto`` is the default above.

When progress is off this is exactly ``dask.compute(*objs)``; when on, the
same results and errors: under a distributed client the objects are computed
with ``client.compute`` and gathered (what ``dask.compute`` does there), and
work left when an error or Ctrl-C ends the wait is cancelled.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time

from dask.callbacks import Callback

__all__ = ["ENV", "MINIMUM_SECONDS", "CountBar", "compute", "news", "setting", "where"]

#: The environment variable that switches progress displays: 0 (off), 1 (on), auto (the default).
ENV = "DKAPPROX_PROGRESS"
#: By default a display appears only once a compute has run this long (seconds).
MINIMUM_SECONDS = 1.0
_OFF = ("0", "false", "no", "off")
_ON = ("1", "true", "yes", "on")
_WIDGET_DT = 0.1  # seconds between two updates of the local widget


def setting(progress=None):
    """True (always show), False (never) or None (where a person is watching).

    ``progress`` (a bool or None) wins over ``DKAPPROX_PROGRESS``; an unknown
    value of either raises ``ValueError``.
    """
    if progress is not None:
        if not isinstance(progress, bool):
            raise ValueError(f"progress must be True, False or None; got {progress!r}.")
        return progress
    raw = os.environ.get(ENV, "")
    value = raw.strip().lower()
    if value in ("", "auto"):
        return None
    if value in _OFF:
        return False
    if value in _ON:
        return True
    raise ValueError(f"{ENV} must be 0 (off), 1 (on) or auto; got {raw!r}.")


def in_kernel() -> bool:
    """True inside a Jupyter kernel (an IPython shell with a kernel), without importing IPython."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    try:
        return getattr(ipython.get_ipython(), "kernel", None) is not None
    except Exception:  # a half-initialized IPython: no kernel to show a widget in
        return False


def _isatty(stream) -> bool:
    try:
        return bool(stream is not None and stream.isatty())
    except (AttributeError, ValueError, OSError):  # replaced or closed streams
        return False


def where(progress=None):
    """``"notebook"``, ``"terminal"`` or None: where a compute's progress goes now."""
    on = setting(progress)
    if on is False or threading.current_thread() is not threading.main_thread():
        return None
    if in_kernel():
        return "notebook"
    if on or _isatty(sys.stderr):
        return "terminal"
    return None


def news(logger, message, *args):
    """A line of news from long work (a solver's iteration): to ``logger`` at INFO where a handler takes it
    (the command line's), else where a person is watching (:func:`where`: stderr on a terminal, the cell's
    output in Jupyter), else nowhere."""
    if logger.hasHandlers():
        logger.info(message, *args)
        return
    place = where()
    if place is None:
        return
    stream = sys.stdout if place == "notebook" else sys.stderr
    try:
        stream.write((message % args if args else message) + "\n")
        stream.flush()
    except (OSError, ValueError):  # a closed stream: the work goes on
        pass


def compute(*objs, progress=None):
    """Compute dask collections like :func:`dask.compute`, showing progress where a person is watching.

    A widget in Jupyter (distributed's under a distributed client), a text
    bar on stderr on a terminal, nothing when stderr is piped or redirected
    to a file. Computes shorter than a second show nothing. dkapprox's own
    passes over the data (fits, :func:`dkapprox.io.write_features`) go
    through this function.

    Parameters
    ----------
    *objs : dask collections
        Arrays, delayed objects, ... as :func:`dask.compute` takes them.
    progress : bool or None, default=None
        True shows progress even where no one seems to watch (and at once),
        False never; None follows the environment variable
        ``DKAPPROX_PROGRESS``: ``0`` off, ``1`` on, unset or ``auto`` where a
        person is watching (a Jupyter kernel, or stderr on a terminal).

    Returns
    -------
    results : tuple
        One result per object, as :func:`dask.compute` returns them.

    Examples
    --------
    >>> import dask.array as da
    >>> import dkapprox
    >>> from dkapprox import RBFSampler
    >>> X = da.ones((1_000, 4), chunks=(250, 4))
    >>> Z = RBFSampler(n_components=8, random_state=0).fit(X).transform(X)
    >>> total, head = dkapprox.compute(Z.sum(), Z[:2])   # a bar on a terminal, nothing here
    >>> head.shape
    (2, 8)
    """
    import dask

    place = where(progress)
    if place is None or _user_display_open() or not all(dask.is_dask_collection(o) for o in objs):
        return dask.compute(*objs)
    minimum = 0.0 if setting(progress) else MINIMUM_SECONDS
    client = _client()
    if client is not None:
        return _compute_on(client, objs, place, minimum)
    with _local_display(place, minimum):
        return dask.compute(*objs)


# -- under a distributed client ----------------------------------------------------------


def _client():
    """The distributed client ``dask.compute`` would use now, or None (the local schedulers)."""
    if "distributed" not in sys.modules:  # no client can exist: never import distributed for this
        return None
    from dask.base import get_scheduler
    from distributed import Client

    with contextlib.suppress(Exception):  # no scheduler, a closed client: dask.compute will say so
        owner = getattr(get_scheduler(), "__self__", None)
        if isinstance(owner, Client) and not owner.asynchronous:
            return owner
    return None


def _compute_on(client, objs, place, minimum):
    from distributed import progress as distributed_progress
    from distributed import wait

    futures = client.compute(list(objs))
    try:
        if not _finished_within(wait, futures, minimum):
            show_distributed(distributed_progress, futures, place)
        return tuple(client.gather(futures))
    finally:
        for future in futures:
            if not future.done():
                future.cancel()


def show_distributed(distributed_progress, futures, place):
    """distributed's widget (returns at once) or its text bar (returns when the futures are done).

    A display that fails (a broken widget library, a closed stream) never fails the compute.
    """
    try:
        if place == "notebook" and _has_ipywidgets():
            from IPython.display import display

            display(distributed_progress(futures, notebook=True))
        else:  # distributed's text bar writes to stdout: the cell's output, or stderr on a terminal
            target = sys.stdout if place == "notebook" else sys.stderr
            client = futures[0].client if futures else None
            before = _feeds(client)
            with contextlib.redirect_stdout(target):
                distributed_progress(futures, notebook=False)
            target.write("\n")
            target.flush()
            _feeds_ended(client, before)
    except Exception:
        pass


def _finished_within(wait, futures, seconds):
    if seconds <= 0:
        return False
    try:
        wait(futures, timeout=seconds)
    except TimeoutError:
        return False
    return True


# -- on dask's local schedulers ----------------------------------------------------------


def _local_display(place, minimum):
    if place == "notebook" and _has_ipywidgets():
        return _WidgetBar(minimum)
    from dask.diagnostics import ProgressBar

    return ProgressBar(minimum=minimum, out=sys.stdout if place == "notebook" else sys.stderr)


def _has_ipywidgets() -> bool:
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return False
    return True


def _user_display_open() -> bool:
    """True when a dask ProgressBar (or one of ours) is already active: one display is enough."""
    from dask.diagnostics import ProgressBar

    for hooks in Callback.active:
        for hook in hooks:
            if isinstance(getattr(hook, "__self__", None), (ProgressBar, _WidgetBar)):
                return True
    return False


class _WidgetBar(Callback):
    """An ipywidgets bar for dask's local schedulers, drawn like dask's ProgressBar (a timer thread)."""

    def __init__(self, minimum=0.0):
        super().__init__()
        self._minimum = minimum
        self._widget = None

    def _start(self, dsk):
        self._state, self._started, self._running = None, time.perf_counter(), True
        self._timer = threading.Thread(target=self._tick, daemon=True)
        self._timer.start()

    def _pretask(self, key, dsk, state):
        self._state = state

    def _finish(self, dsk, state, errored):
        self._running = False
        self._timer.join()
        self._state = state
        if self._widget is not None or time.perf_counter() - self._started >= self._minimum:
            self._draw_safely(finished=True, errored=errored)

    def _tick(self):
        while self._running:
            if time.perf_counter() - self._started >= self._minimum:
                self._draw_safely()
            time.sleep(_WIDGET_DT)

    def _draw_safely(self, **kwargs):
        try:  # a display that fails (a broken widget library) never fails the compute
            self._draw(**kwargs)
        except Exception:
            self._running = False

    def _counts(self):
        state = self._state
        if not state:
            return 0, 0
        done = len(state["finished"])
        return done, done + sum(len(state[k]) for k in ("ready", "waiting", "running"))

    def _draw(self, finished=False, errored=False):
        done, total = self._counts()
        if finished and not errored:
            done = total = max(total, 1)
        if self._widget is None:
            self._widget = _IntBar()
        self._widget.draw(done, total, time.perf_counter() - self._started, finished, errored)


class _IntBar:
    """An ipywidgets bar with a label, displayed once and updated in place."""

    def __init__(self):
        from IPython.display import display
        from ipywidgets import HTML, HBox, IntProgress, Layout

        self._bar = IntProgress(min=0, max=1, value=0, description="dask", bar_style="info",
                                layout=Layout(width="40%"))
        self._label = HTML()
        display(HBox([self._bar, self._label]))

    def draw(self, done, total, elapsed, finished=False, errored=False):
        self._bar.max = max(total, 1)
        self._bar.value = done
        status = "error" if errored else ("done" if finished else "running")
        self._label.value = f"{done} / {total} tasks, {elapsed:.1f} s, {status}"
        if finished:
            self._bar.bar_style = "danger" if errored else "success"


#: the longest a finished distributed text bar waits for the scheduler's loop that fed it to end
FEED_END_TIMEOUT_S = 5.0


def _feeds(client):
    """How many feeds the scheduler serves, or None where that cannot be asked (then nothing waits)."""
    if client is None:
        return None

    def count(dask_scheduler=None):  # a closure, sent by value: the scheduler needs no dkapprox
        return sum(op == "feed" for op in list(getattr(dask_scheduler, "_comms", {}).values()))

    try:
        return client.run_on_scheduler(count)
    except Exception:  # noqa: BLE001 - an old or foreign scheduler: the bar still draws
        return None


def _feeds_ended(client, before, timeout=FEED_END_TIMEOUT_S):
    """Wait until the scheduler's loop that fed a finished bar has ended (at most ``timeout`` s).

    The scheduler feeds distributed's text bar from a loop that sleeps 100 ms between writes and
    ends only at its first write after the bar closed its comm. A cluster closed within that sleep
    cancels the loop, and distributed logs the CancelledError as an ERROR on the user's terminal
    (CI: a fit right after a bar, then the client closed). So the bar returns only once the
    scheduler serves no more feeds than before it started: a condition, asked on the scheduler.
    """
    if client is None or before is None:
        return

    async def down_to(count, seconds, dask_scheduler=None):
        import asyncio
        import time as clock

        def feeds():
            return sum(op == "feed" for op in list(getattr(dask_scheduler, "_comms", {}).values()))

        deadline = clock.monotonic() + seconds
        while feeds() > count and clock.monotonic() < deadline:
            await asyncio.sleep(0.005)
        return feeds()

    with contextlib.suppress(Exception):
        client.run_on_scheduler(down_to, before, timeout)


class CountBar:
    """Progress of ``total`` parts counted as they finish (a write's blocks under a distributed client).

    distributed's own bars watch keys on the scheduler and wait until every
    key is known there; a write releases each block as soon as it finishes, so
    those bars could wait forever for a key already forgotten. This one is
    told the count: a text bar drawn as dask's (on stderr on a terminal, in the
    cell's output in a notebook without ipywidgets) or an ipywidgets bar.
    Redrawn at most every 0.1 s; a display that fails never fails the work.
    """

    def __init__(self, total, place):
        self.total, self.place, self._started, self._drawn = total, place, time.perf_counter(), 0.0
        self._widget = None
        self._text = place != "notebook" or not _has_ipywidgets()
        self._broken = False

    def update(self, done, *, finished=False, errored=False):
        now = time.perf_counter()
        if self._broken or (not finished and now - self._drawn < _WIDGET_DT):
            return
        self._drawn = now
        try:
            if self._text:
                self._draw_text(done, now - self._started, finished)
            else:
                if self._widget is None:
                    self._widget = _IntBar()
                self._widget.draw(done, self.total, now - self._started, finished, errored)
        except Exception:  # a broken widget library or a closed stream: stop drawing, keep working
            self._broken = True

    def _draw_text(self, done, elapsed, finished):
        from dask.utils import format_time

        stream = sys.stdout if self.place == "notebook" else sys.stderr
        fraction = done / self.total if self.total else 1.0
        stream.write(f"\r[{'#' * int(40 * fraction):<40}] | {int(100 * fraction)}% Completed | "
                     f"{format_time(elapsed)}" + ("\n" if finished else ""))
        stream.flush()
