"""API names in running text link to the JAX reference, as the JAX documentation's own do:
only inline `<code>` in prose, never code blocks, headings or links. A link loads nothing
until followed, so the site stays offline.
"""
import re

REFERENCE = "https://docs.jax.dev/en/latest/"
AUTOSUMMARY = REFERENCE + "_autosummary/"
JAX_REFERENCE = {
    **{name: f"{AUTOSUMMARY}jax.lax.{name}.html" for name in
       ("psum", "psum_scatter", "all_gather", "ppermute")},
    **{name: f"{AUTOSUMMARY}jax.{name}.html" for name in
       ("shard_map", "jit", "devices", "distributed.initialize", "block_until_ready")},
    **{name: f"{REFERENCE}jax.sharding.html#jax.sharding.{name}" for name in
       ("NamedSharding", "PartitionSpec", "Mesh")}}
# Bare names that are also ordinary words or other things: only linked with a prefix.
NEEDS_PREFIX = {"jit", "devices", "distributed.initialize"}
INLINE_CODE = re.compile(r"<code>((?:jax\.)?(?:lax\.)?)([A-Za-z_][\w.]*)(\([^<]*\))?</code>")
# Where a link must not go: code blocks, headings, existing links, the TOC's copies.
NOT_PROSE = re.compile(r"<(pre|h[1-6]|a|nav|script|style)\b.*?</\1>", re.S)


def linked(match):
    prefix, name = match.group(1), match.group(2)
    url = JAX_REFERENCE.get(name)
    if url is None or (name in NEEDS_PREFIX and not prefix):
        return match.group(0)
    return f'<a href="{url}" class="api-link">{match.group(0)}</a>'


def with_api_links(html):
    """`html` with each known API name in inline prose code linked to its reference."""
    pieces, end = [], 0
    for kept in NOT_PROSE.finditer(html):
        pieces += [INLINE_CODE.sub(linked, html[end:kept.start()]), kept.group(0)]
        end = kept.end()
    return "".join(pieces + [INLINE_CODE.sub(linked, html[end:])])
