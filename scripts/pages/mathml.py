"""Every formula typeset at build time as MathML by Temml (typeset.cjs), so readers load
no math script: a Markdown extension whose postprocessor sees the page's finished HTML,
recorded values and notebook cells in (its CSS: docs/overrides/partials/math.css.html). The
MathML is rebuilt from presentation elements and attributes only, every text escaped (a
notebook's TeX is untrusted), with its TeX and a plain-text reading kept.
"""
import atexit
import html
import json
import re
import select
import subprocess
import xml.etree.ElementTree as ElementTree
from pathlib import Path

from markdown.extensions import Extension
from markdown.postprocessors import Postprocessor

from scripts.pages.page_language import page_finished
from scripts.pages.page_location import page_location
from scripts.pages.recorded_text import PageError

INLINE = re.compile(r'<span class="arithmatex">\\\((.*?)\\\)</span>([.,;:!?)]*)', re.S)
DISPLAY = re.compile(r'<div class="arithmatex">\\\[(.*?)\\\]</div>', re.S)
FORMULA = re.compile(f"{INLINE.pattern}|{DISPLAY.pattern}", re.S)
LEFTOVER = 'class="arithmatex"'
# A part of a display formula ends at a \qquad outside any braces.
QQUAD = re.compile(r"\\qquad(?![A-Za-z])")
TYPESET = Path(__file__).with_name("typeset.cjs")
TIMEOUT_S = 300  # for one page's formulas

MATHML_ELEMENTS = frozenset("""
    math semantics annotation mrow mi mn mo ms mtext mspace msub msup msubsup mfrac msqrt
    mroot mstyle mtable mtr mtd mlabeledtr munder mover munderover mpadded mphantom
    menclose merror mmultiscripts mprescripts none
""".split())
# Presentation only: no href, no event handler, no id; a `class` is Temml's own.
MATHML_ATTRIBUTES = frozenset("""
    display mathvariant stretchy fence separator lspace rspace accent accentunder
    movablelimits largeop symmetric minsize maxsize linethickness columnalign rowalign
    columnspacing rowspacing columnlines rowlines frame framespacing equalrows equalcolumns
    displaystyle scriptlevel width height depth voffset notation open close separators
    mathcolor mathbackground mathsize form columnspan rowspan align encoding class style
""".split())
# Without a parenthesis (or an escape that could spell one) CSS can fetch nothing.
SAFE_STYLE = re.compile(r"[^()\\]*")


class MathError(ValueError):
    """A formula that cannot be typeset; the message names it and the fix."""


def inert(root):
    """Temml's parsed MathML with presentation attributes only, or MathError."""
    for node in root.iter():
        if node.tag not in MATHML_ELEMENTS:
            raise MathError(f"Temml wrote a <{node.tag}> element, which is not MathML")
        for name in [name for name in node.attrib if name not in MATHML_ATTRIBUTES
                     or name == "style" and not SAFE_STYLE.fullmatch(node.attrib[name])]:
            del node.attrib[name]
    return root


def top_level_parts(tex):
    """Split at each \\qquad that is not inside braces; each part is a whole formula."""
    parts, depth, start = [], 0, 0
    for index, char in enumerate(tex):
        depth += {"{": 1, "}": -1}.get(char, 0)
        if depth == 0 and QQUAD.match(tex, index):
            parts.append(tex[start:index])
            start = index + len("\\qquad")
    parts.append(tex[start:])
    return [part.strip() for part in parts if part.strip()]


class Temml:
    """Temml in one Node process for the whole build (one per page cost 0.1 s a page); it
    ends when its input does, however this process ends."""

    def __init__(self):
        self.node = None

    def __call__(self, formulas, where):
        if self.node is None or self.node.poll() is not None:
            try:
                self.node = subprocess.Popen(["node", str(TYPESET)], stdin=subprocess.PIPE,
                                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                             encoding="utf-8")
            except FileNotFoundError:
                raise MathError("node is missing: install Node.js 20 (apt-get install "
                                "nodejs), then run `make install`") from None
        try:
            self.node.stdin.write(json.dumps([{"tex": tex, "display": display}
                                              for tex, display in formulas]) + "\n")
            self.node.stdin.flush()
        except BrokenPipeError:
            pass  # it has ended: its last words are read below
        if not select.select([self.node.stdout], [], [], TIMEOUT_S)[0]:
            self.close()
            raise MathError(f"{where}: Temml took over {TIMEOUT_S} s on this page's formulas")
        answer = self.node.stdout.readline()
        if not answer:
            said = (self.node.stderr.read().strip().splitlines() or ["no message"])[-1]
            self.close()
            raise MathError(f"{where}: {TYPESET.name} failed: {said}")
        results = json.loads(answer)
        for (tex, _), result in zip(formulas, results):
            if "error" in result:
                raise MathError(f"{where}: cannot typeset the formula {tex!r} "
                                f"({result['error']}); rewrite it in the TeX that Temml "
                                f"reads (temml.org)")
        return [result["mathml"] for result in results]

    def close(self):
        if self.node is not None:
            self.node.kill()
            self.node.communicate()
            self.node = None


temml = Temml()
atexit.register(temml.close)


# Elements whose children after the first are scripts, one level smaller (mroot: two).
SCRIPTED = {"msub": 1, "msup": 1, "msubsup": 1, "munder": 1, "mover": 1, "munderover": 1,
            "mmultiscripts": 1, "mroot": 2}
# ∏ ∐ ∑, ∫ ∬ ∭ ∮ ∯, ⋀ ⋁ ⋂ ⋃: TeX keeps a large operator's thin space in a script too.
LARGE_OPERATORS = set("\u220f\u2210\u2211\u222b\u222c\u222d\u222e\u222f\u22c0\u22c1\u22c2\u22c3")


def tight_in_scripts(node, depth=0, compact=False):
    """No space around an operator a level below the line ("r=0" under a Σ), as in TeX's
    script styles, where MathML Core keeps it; levels counted as math-depth counts them."""
    level = node.get("scriptlevel", "")
    if level.lstrip("+-").isdigit():
        depth = depth + int(level) if level[0] in "+-" else int(level)
    if node.get("displaystyle") in ("true", "false"):
        compact = node.get("displaystyle") == "false"
    character = (node.text or "").strip()
    # An empty operator draws nothing, but MathML Core spaces an unknown one 5/18 em a side.
    if node.tag == "mo" and (depth > 0 and character not in LARGE_OPERATORS or not character) \
            and not {"lspace", "rspace"} & set(node.attrib):
        node.attrib.update(lspace="0", rspace="0")
    for index, child in enumerate(node):
        if index and node.tag in SCRIPTED:
            tight_in_scripts(child, depth + SCRIPTED[node.tag], True)
        elif node.tag == "mfrac":
            tight_in_scripts(child, depth + compact, True)
        else:
            tight_in_scripts(child, depth, compact)


# Unicode has super- and subscript forms of these, so "2^{20}" reads "2²⁰" and "c_0" "c₀".
SUPERSCRIPT = str.maketrans("0123456789+−=()", "⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁼⁽⁾")
SUBSCRIPT = str.maketrans("0123456789+−=()", "₀₁₂₃₄₅₆₇₈₉₊₋₌₍₎")
TOKENS = {"mi", "mn", "mo", "mtext", "ms"}
INVISIBLE = re.compile("[\u2061-\u2064\ufe00-\ufe0f]")  # function application, variation...


def reading(node):
    tag, children = node.tag, list(node)
    if tag in TOKENS:
        return node.text or ""
    if tag == "mspace":
        return " "
    if tag == "mphantom":
        return ""
    if tag == "mfrac" and len(children) == 2:
        return f"{grouped(children[0])}/{grouped(children[1])} "  # "2/N X", not "2/NX"
    if tag == "msqrt":
        return f"√({''.join(map(reading, children))})"
    marks = {"msub": "_", "munder": "_", "msup": "^", "mover": "^", "msubsup": "_^",
             "munderover": "_^"}.get(tag)
    if marks and len(children) == len(marks) + 1:
        text = reading(children[0])
        for mark, script in zip(marks, children[1:]):
            written = reading(script).strip()
            text += written.translate(SUBSCRIPT if mark == "_" else SUPERSCRIPT) \
                if re.fullmatch(r"[0-9+−=()]+", written) else f"{mark}{grouped(script)}"
        return text
    return "".join(map(reading, children))


def grouped(node):
    """A fraction's or a script's part, in parentheses unless it is one token."""
    text = reading(node).strip()
    return text if node.tag in TOKENS or len(text) <= 1 else f"({text})"


def formula(markup, tex):
    """(A formula's MathML for the page, its reading). The drawn part and the TeX sit in an
    inner <semantics>, so the search index keeps the reading alone."""
    try:
        root = inert(ElementTree.fromstring(markup))
    except ElementTree.ParseError as error:
        raise MathError(f"Temml wrote MathML that does not parse ({error}) for {tex!r}") from None
    shown = "block" if root.get("display") == "block" else "inline"
    tight_in_scripts(root, compact=shown == "inline")
    # One line of plain text: "(p−1)/p G", "g_r=2/N X_r^⊤(X_rw−y_r)".
    text = re.sub(r"\s+", " ", INVISIBLE.sub("", reading(root))).strip()
    body = "".join(ElementTree.tostring(child, encoding="unicode") for child in root)
    if len(root) != 1:  # <semantics> draws its first child only
        body = f"<mrow>{body}</mrow>"
    tex, plain = html.escape(tex, quote=False), html.escape(text, quote=False)
    return (f'<math display="{shown}"><semantics><semantics data-search-exclude>{body}'
            f'<annotation encoding="application/x-tex">{tex}</annotation></semantics>'
            f'<annotation encoding="text/plain">{plain}</annotation></semantics></math>'), text


def typeset(html_text, where):
    """`html_text` with every arithmatex formula as MathML; `where` names the page."""
    matches = list(FORMULA.finditer(html_text))
    # Each match's formulas: an inline one, or each part of a display one.
    wanted = [[(html.unescape(match[1]).strip(), False)] if match[1] is not None else
              [(part, True) for part in top_level_parts(html.unescape(match[3]))]
              for match in matches]
    requests = [request for formulas in wanted for request in formulas]
    typeset_formulas = iter(formula(markup, tex) for (tex, _), markup
                            in zip(requests, temml(requests, where) if requests else []))
    pieces, end = [], 0
    for match, formulas in zip(matches, wanted):
        pieces.append(html_text[end:match.start()])
        end = match.end()
        parts = [next(typeset_formulas) for _ in formulas]
        if match[1] is not None:
            # The punctuation stays on the formula's line, as TeX keeps it.
            pieces.append(f'<span class="math-nowrap">{parts[0][0]}{match[2]}</span>'
                          if match[2] else parts[0][0])
            continue
        label = html.escape(" ".join(text for _, text in parts))
        # Focusable so a reader without a mouse can scroll a row that is still too wide.
        pieces.append(f'<div class="math-display" tabindex="0" role="group" '
                      f'aria-label="{label}">{"".join(markup for markup, _ in parts)}</div>')
    converted = "".join(pieces) + html_text[end:]
    if LEFTOVER in converted:
        at = converted.index(LEFTOVER)
        raise MathError(f"{where}: a formula in an unexpected form was left as TeX near "
                        f"{converted[at:at + 80]!r}; write it as $...$ or $$...$$")
    return converted


class Formulas(Postprocessor):
    def run(self, text):
        if not page_finished(self.md):  # a heading's text, for the toc: left as TeX
            return text
        try:
            return typeset(text, page_location(self.md).source or "the page")
        except MathError as error:
            raise PageError(str(error)) from None


class MathML(Extension):
    def extendMarkdown(self, md):
        # After the page language's recorded text (0), which may hold a formula.
        md.postprocessors.register(Formulas(md), "mathml", -10)


makeExtension = MathML  # the name Python-Markdown calls
