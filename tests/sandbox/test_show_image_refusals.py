"""What ``show_image`` says of an image it refuses for its size or for their number says what to do: show it smaller,
or show the others from the next execution. Before: "5881918 bytes is over the 3932160-byte limit" and "at most 8
images per execution", and the model was left to guess. An image whose headers are not whole is refused saying what
is wrong with them, and one over the Messages API's 8,000 pixels a side saying its size.

In-process: the refusals come before anything is sent, so the worker's connection is a stand-in that counts.
"""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from sandbox._supervisor import worker
from sandbox._supervisor.limits import MAX_IMAGE_BYTES, MAX_IMAGES, MAX_IMAGES_TOTAL_BYTES
from tests import image_samples
from tests.servers.content_server import png

PNG_HEAD = b"\x89PNG\r\n\x1a\n"
SMALLER = "over the 3,932,160 bytes one image may have: show it smaller (fewer pixels, or as JPEG)"


class Counted:
    """The worker's connection as far as ``show_image``'s limits read it, with the images already shown."""

    def __init__(self, images_sent: int) -> None:
        self.images_sent = images_sent
        self.image_bytes_sent = 0


def test_an_image_too_large_says_how_large_and_to_show_it_smaller(tmp_path: Path) -> None:
    big = PNG_HEAD + bytes(MAX_IMAGE_BYTES)
    (tmp_path / "chart.png").write_bytes(big)
    with pytest.raises(ValueError) as given:
        worker.show_image(big)
    with pytest.raises(ValueError) as read:
        worker.show_image(str(tmp_path / "chart.png"))
    assert str(given.value) == f"show_image(): the image is 3,932,168 bytes, {SMALLER}"
    assert str(read.value) == f"show_image(): {tmp_path / 'chart.png'} is 3,932,168 bytes, {SMALLER}"


def test_an_image_past_the_count_says_to_show_the_others_from_the_next_execution(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(worker, "_connection", Counted(MAX_IMAGES))
    with pytest.raises(ValueError) as refused:
        worker.show_image(base64.b64decode(png(4, 4)))
    assert str(refused.value) == (
        "show_image(): at most 8 images per execution: show the others from the next one (its variables are kept), or "
        "put several in one image"
    )


def test_an_image_past_the_executions_total_says_to_show_it_from_the_next_execution_or_smaller(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Before: "… may hold 8388608 bytes together; 8388600 are shown and this one has 65", and nothing to do.
    counted = Counted(2)
    counted.image_bytes_sent = MAX_IMAGES_TOTAL_BYTES - 8
    monkeypatch.setattr(worker, "_connection", counted)
    with pytest.raises(ValueError) as refused:
        worker.show_image(base64.b64decode(png(4, 4)))
    assert str(refused.value) == (
        "show_image(): the images of one execution may hold 8,388,608 bytes together; 8,388,600 are shown and this "
        "one has 65: show it from the next execution (its variables are kept), or smaller (fewer pixels, or as JPEG)"
    )


@pytest.mark.parametrize(
    ("image", "said"),
    [
        (b"GIF89a" + bytes(30), "the GIF's logical screen is 0×0 pixels"),
        (PNG_HEAD + bytes(30), "the PNG does not begin with its IHDR chunk"),
        (
            base64.b64decode(png(4, 4))[:29] + bytes(4) + base64.b64decode(png(4, 4))[33:],
            "the PNG's IHDR chunk is corrupt (CRC mismatch)",
        ),
        (image_samples.jpeg(7, 6)[:-2], "the JPEG is cut short (no end-of-image marker after its image data)"),
        (b"RIFF\x00\x00\x00\x00WEBPVP8 " + bytes(20), "the WebP's RIFF header says 8 bytes, not its 36"),
    ],
)
def test_an_image_whose_headers_are_not_whole_is_refused_saying_what_is_wrong(
    image: bytes, said: str, tmp_path: Path
) -> None:
    # Before: anything that began with a signature was shown, and the Messages API refused the conversation from then
    # on ("Could not process image"); the host now leaves such an image out, so the script hears of it here, where it
    # can still act on it. Refused before anything is sent, so this runs in-process.
    (tmp_path / "image").write_bytes(image)
    for value in (image, str(tmp_path / "image"), {"type": "image", "data": base64.b64encode(image).decode()}):
        with pytest.raises(ValueError) as refused:
            worker.show_image(value)
        assert str(refused.value) == f"show_image(): {said}"


@pytest.mark.parametrize(
    ("image", "size"),
    [
        (base64.b64decode(png(9_000, 10)), "9,000×10"),
        (base64.b64decode(png(1, 100_000)), "1×100,000"),
        (image_samples.gif(8_001, 3), "8,001×3"),
        (image_samples.jpeg(9_001, 600), "9,001×600"),
        (image_samples.webp_extended(9_000, 2), "9,000×2"),
    ],
)
def test_an_image_over_the_apis_pixels_a_side_is_refused_saying_its_size(image: bytes, size: str) -> None:
    # Before: shown, then left out by the host with a note ("[a shown image of 9,000×10 pixels was left out …]") that
    # the script never saw: it went on as if the model had the picture.
    for value in (image, {"type": "image", "data": base64.b64encode(image).decode()}):
        with pytest.raises(ValueError) as refused:
            worker.show_image(value)
        assert str(refused.value) == (
            f"show_image(): the image is {size} pixels, over the 8,000 pixels a side the Messages API takes: show it "
            "smaller (fewer pixels, or cut into parts)"
        )


def test_an_image_of_8000_pixels_a_side_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[dict[str, object]] = []

    class Sending(Counted):
        current_exec = 1

        def send(self, message: dict[str, object]) -> None:
            sent.append(message)

    monkeypatch.setattr(worker, "_connection", Sending(0))
    worker.show_image(base64.b64decode(png(8_000, 8_000)))
    assert [m["mime"] for m in sent] == ["image/png"]


def test_an_empty_image_or_a_file_that_is_no_image_is_refused_naming_the_file(tmp_path: Path) -> None:
    # Before: "the data is not a PNG, JPEG, GIF or WebP image" for each, though a file was named and an empty one
    # (not yet written, or not closed) is no image of another type.
    (tmp_path / "empty.png").write_bytes(b"")
    (tmp_path / "chart.svg").write_bytes(b"<svg/>")
    said = {}
    for value in (b"", str(tmp_path / "empty.png"), tmp_path / "chart.svg", b"<svg/>"):
        with pytest.raises(ValueError) as refused:
            worker.show_image(value)
        said[str(value)] = str(refused.value)
    assert list(said.values()) == [
        "show_image(): the data is empty (0 bytes)",
        f"show_image(): {tmp_path / 'empty.png'} is empty (0 bytes)",
        f"show_image(): {tmp_path / 'chart.svg'} is not a PNG, JPEG, GIF or WebP image",
        "show_image(): the data is not a PNG, JPEG, GIF or WebP image",
    ]
