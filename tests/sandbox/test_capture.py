"""Output capture in the supervisor: bounded memory, a preview, and a file with everything."""

from __future__ import annotations

from pathlib import Path

from sandbox._supervisor.capture import OutputCapture


def test_short_output_stays_whole_and_writes_no_file(tmp_path: Path) -> None:
    capture = OutputCapture(str(tmp_path / "out" / "1-stdout.txt"))
    capture.feed(b"hello ")
    capture.feed(b"world\n")
    assert capture.finish(100) == {"head": "hello world\n", "tail": "", "truncated": False, "bytes": 12, "path": None}
    assert not (tmp_path / "out").exists()


def test_output_over_the_character_cap_is_previewed_and_saved(tmp_path: Path) -> None:
    path = tmp_path / "out" / "2-stdout.txt"
    capture = OutputCapture(str(path))
    text = "".join(f"{i}\n" for i in range(1000))
    capture.feed(text.encode())
    report = capture.finish(100)
    assert report["truncated"] and report["path"] == str(path) and report["bytes"] == len(text)
    # The tail starts at its first whole line ("988"), not at "7\n" left of line 987 (before: text[-50:]).
    assert report["head"] == text[:50] and report["tail"] == text[-48:] == "".join(f"{i}\n" for i in range(988, 1000))
    assert path.read_text(encoding="utf-8") == text


def test_a_cut_output_shows_whole_lines_where_one_ends_near_the_cut(tmp_path: Path) -> None:
    text = "".join(f"line {i:04d}\n" for i in range(2000))  # 10 characters a line
    capture = OutputCapture(str(tmp_path / "1-stdout.txt"))
    capture.feed(text.encode())
    report = capture.finish(105)  # 52 characters each side: 5 lines and 2 characters
    assert report["head"] == text[:50] and report["tail"] == text[-50:]  # before: "…line 0005\nli", "04\nline 1995…"
    long = "x" * 500  # a line longer than the cut's slack is cut where it falls
    capture = OutputCapture(str(tmp_path / "2-stdout.txt"))
    capture.feed(f"{long}\n{long}".encode())
    report = capture.finish(100)
    assert report["head"] == "x" * 50 and report["tail"] == "x" * 50


def test_output_over_the_memory_bound_spills_to_the_file_and_keeps_the_tail(tmp_path: Path) -> None:
    path = tmp_path / "3-stdout.txt"
    capture = OutputCapture(str(path), memory_bytes=1000, file_bytes=10_000)
    text = "".join(f"{i:05d}\n" for i in range(500))
    for line in text.splitlines(keepends=True):
        capture.feed(line.encode())
    report = capture.finish(20)
    assert report["truncated"] and report["bytes"] == report["saved"] == 3000
    assert report["head"] == text[:10] and report["tail"] == text[-10:]
    assert path.read_text(encoding="utf-8") == text


def test_the_file_stops_growing_at_its_cap(tmp_path: Path) -> None:
    path = tmp_path / "4-stdout.txt"
    capture = OutputCapture(str(path), memory_bytes=10, file_bytes=100)
    for _ in range(100):
        capture.feed(b"x" * 10)
    report = capture.finish(10)
    assert report["bytes"] == 1000 and path.stat().st_size == report["saved"] == 100  # the host says it holds a part


def test_invalid_utf8_is_replaced(tmp_path: Path) -> None:
    capture = OutputCapture(str(tmp_path / "5.txt"))
    capture.feed(b"ok \xff\xfe\n")
    assert capture.finish(100)["head"] == "ok \ufffd\ufffd\n"


def test_an_unwritable_spill_file_still_gives_a_preview(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("", encoding="utf-8")
    capture = OutputCapture(str(blocker / "6.txt"), memory_bytes=10)
    capture.feed(b"y" * 100)
    report = capture.finish(10)
    assert report["truncated"] and report["path"] is None and report["head"] == "yyyyy"
