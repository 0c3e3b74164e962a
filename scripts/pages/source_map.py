"""A source map kept true to a minified file that gained text: what a debugger shows for a
column of the built bundle is the original line it showed before.

A source map's `mappings` is one group of segments per line of the generated file, each
segment a few Base64 VLQ numbers (https://tc39.es/ecma426/): the generated column first,
relative to the segment before it on the same line, then the original file, line and
column (and name), each relative to the segment before it anywhere in the map. Text
inserted into one line moves the generated columns after it and nothing else, so only
the first number of that line's segments changes; every other number stays as written.
"""
BASE64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
DIGIT = {character: value for value, character in enumerate(BASE64)}
CONTINUES = 32  # a digit's sixth bit: another digit of the same number follows
LOW_BITS = 31


def decoded(segment):
    """The numbers of one segment, as written (relative, signed)."""
    numbers, value, shift = [], 0, 0
    for character in segment:
        digit = DIGIT[character]
        value += (digit & LOW_BITS) << shift
        if digit & CONTINUES:
            shift += 5
            continue
        numbers.append(-(value >> 1) if value & 1 else value >> 1)  # lowest bit: sign
        value, shift = 0, 0
    return numbers


def encoded(numbers):
    digits = []
    for number in numbers:
        value = (-number << 1) | 1 if number < 0 else number << 1
        while True:
            digit, value = value & LOW_BITS, value >> 5
            digits.append(BASE64[digit | (CONTINUES if value else 0)])
            if not value:
                break
    return "".join(digits)


def with_insertions(mappings, line, insertions):
    """`mappings` for the generated file after `insertions`, (column, length) pairs on
    generated `line` (0-based, columns of the text before any insertion): a segment at or
    after a column moves right by every length inserted at or before it."""
    lines = mappings.split(";")
    before = after = 0  # absolute generated columns of the previous segment
    segments = []
    for segment in filter(None, lines[line].split(",")):
        numbers = decoded(segment)
        before += numbers[0]
        moved = before + sum(length for column, length in insertions if column <= before)
        segments.append(encoded([moved - after, *numbers[1:]]))
        after = moved
    lines[line] = ",".join(segments)
    return ";".join(lines)


def inserted(text, insertions):
    """`text` with each (index, string) of `insertions` put in at its index of `text`."""
    pieces, end = [], 0
    for index, string in sorted(insertions, key=lambda pair: pair[0]):
        pieces += [text[end:index], string]
        end = index
    return "".join(pieces + [text[end:]])
