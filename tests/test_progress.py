"""The progress line's ETA, on a fake clock: none until the rate of finished cells means
something, then the work left at the recent rate; off a terminal, plain lines a minute."""

from __future__ import annotations

import io

from rageval._progress import ETA_MIN_SECONDS, PLAIN_EVERY_S, RATE_WINDOW_SECONDS, ProgressLine


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def line_of(rows: int, cells_per_row: int, clock: Clock) -> ProgressLine:
    return ProgressLine(rows, cells_per_row=cells_per_row, stream=io.StringIO(), clock=clock)


def test_the_first_row_of_a_pipelined_run_gives_no_eta() -> None:
    """The issue's run: 200 rows of 8 metrics; every row of the window starts at once, the
    first one finishes after 11 s, then rows finish at 3.4 a second (66 s in all). The first
    row alone once made an ETA of 36 minutes."""
    clock = Clock()
    line = line_of(200, 8, clock)
    clock.now = 11.0
    line.row_done(0)
    assert line.eta() is None and "ETA" not in line.text()
    # the rows keep finishing: an ETA once a wave of them has, close to the true time left
    finished = 1
    while clock.now < 45.0:
        clock.now += 1.0
        while finished < min(200, 1 + int((clock.now - 11.0) * 3.4)):
            line.row_done(finished)
            finished += 1
        line.eta()  # drawn once a second
    eta = line.eta()
    true_left = (200 - finished) / 3.4
    assert eta is not None and 0.8 * true_left <= eta <= 1.25 * true_left, (eta, true_left)


def test_the_rate_is_measured_from_the_first_finished_row() -> None:
    """Before a row finishes the pipeline is filling: cells trickle in (each row's later
    requests wait on its earlier replies), which is not the run's pace."""
    clock = Clock()
    line = line_of(100, 4, clock)
    done = 0
    while clock.now < 8.0:  # filling: 5 cells a second (of rows 50 to 89), no row finished
        clock.now += 1.0
        for _ in range(5):
            line.cell_done(50 + done % 40)
            done += 1
        assert line.eta() is None  # however long it takes
    row = 0
    line.row_done(row)  # the first row: from here on 5 rows of 4 cells, 20 cells, a second
    while clock.now < 8.0 + ETA_MIN_SECONDS:
        clock.now += 1.0
        for _ in range(5):
            row += 1
            line.row_done(row)
        if clock.now < 8.0 + ETA_MIN_SECONDS:
            assert line.eta() is None  # too early to say
    eta = line.eta()
    assert eta is not None
    assert abs(eta - (400 - line.cells_done) / 20) < 1.0  # the steady rate, not the fill's


def test_no_eta_before_a_share_of_the_work_is_done() -> None:
    clock = Clock()
    line = line_of(1000, 1, clock)
    for row in range(10):  # 1% of the rows in a minute
        clock.now += 6.0
        line.row_done(row)
    assert line.eta() is None


def test_a_cell_scored_again_and_its_row_count_once() -> None:
    clock = Clock()
    line = line_of(2, 2, clock)
    for _ in range(5):  # repeats: the same cells report again
        line.cell_done(0)
    line.row_done(0)
    assert line.cells_done == 2
    line.row_done(1)  # a row whose cells were not reported (the Ray engine)
    assert line.cells_done == 4 and line.eta() is None  # nothing left


def test_the_rate_follows_a_run_that_slows_down() -> None:
    clock = Clock()
    line = line_of(10_000, 1, clock)
    row = 0
    for rate, seconds in ((100, 60), (10, int(RATE_WINDOW_SECONDS) + 5)):
        for _ in range(seconds):
            clock.now += 1.0
            for _ in range(rate):
                line.row_done(row)
                row += 1
            line.eta()
    eta = line.eta()
    assert eta is not None and abs(eta - (10_000 - row) / 10) / ((10_000 - row) / 10) < 0.1


def test_the_progress_line_shows_the_stop() -> None:
    stream = io.StringIO()
    line = ProgressLine(10, stream=stream)
    line.note("stopping: waiting for 3 requests in flight; Ctrl-C again to stop now")
    line.counters.stopping = 3
    line.update(force=True)
    written = stream.getvalue()
    assert "stopping: waiting for 3 requests in flight; Ctrl-C again to stop now\n" in written
    assert written.rstrip().endswith("rows 0/10  stopping: 3 in flight")


def test_off_a_terminal_the_progress_is_a_plain_line_a_minute() -> None:
    """A CI log or a notebook gets no carriage returns; a quick run writes nothing at all, a
    run against a slow judge a line a minute and its final state."""
    clock = Clock()
    stream = io.StringIO()
    quick = ProgressLine(4, stream=stream, clock=clock, plain_every=PLAIN_EVERY_S)
    for row in range(4):
        clock.now += 1.0
        quick.row_done(row)
        quick.update()
    quick.close()
    assert stream.getvalue() == ""

    slow = ProgressLine(100, stream=stream, clock=clock, plain_every=PLAIN_EVERY_S)
    for row in range(100):
        clock.now += 5.0  # a row every 5 s: 500 s in all
        slow.row_done(row)
        slow.update()
    slow.close()
    lines = stream.getvalue().splitlines(keepends=True)
    assert "\r" not in stream.getvalue() and all(line.endswith("\n") for line in lines)
    # a line at each minute of the 500 s (the 8th, at 480 s), then the final state
    assert len(lines) == 9, lines
    assert lines[0].startswith("rageval: rows 12/100") and "ETA" in lines[0]
    assert lines[-1] == "rageval: rows 100/100\n"
