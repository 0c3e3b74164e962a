"""The bare theme page (tests/site_reference.py) repeated to a lesson page's element count:
a browser paints a long page before the theme's script runs, so only a page as long says
what the theme alone blocks. The bare page's frame is about 200 elements, each repeated
section about 77."""
import re

from site_reference import PAGE

FRAME_ELEMENTS, SECTION_ELEMENTS = 200, 77
ELEMENT = re.compile(r"<[a-zA-Z]")


def elements(html):
    """How many elements a page's HTML opens."""
    return len(ELEMENT.findall(html))


def long_page_path(page):
    """Where the bare page as long as the lesson page `page` ("lessons/<id>/") is served."""
    return f"long/{page}"


def long_page(length):
    """PAGE's sections repeated to about `length` elements once built."""
    repeats = max(1, round((length - FRAME_ELEMENTS) / SECTION_ELEMENTS))
    heading, body = PAGE.split("\n", 1)
    sections = "".join(f"\n## Part {number}\n{body.replace('# ', '### ')}"
                       for number in range(1, repeats + 1))
    return f"{heading}\n{sections}"


def long_pages(lengths):
    """{lesson page: its element count} as build_reference()'s pages, one as long as each."""
    return {f"{long_page_path(page)}index.md": long_page(length)
            for page, length in lengths.items()}
