// A code block wider than the screen scrolls sideways, and only what takes focus can be
// scrolled from a keyboard. Every block is built with tabindex="0" (scripts/pages/markup.py);
// the theme takes it away again on touch screens, which can have keyboards too. Give it
// back to the blocks that do scroll: all sizes are read before any attribute is written,
// so the browser lays the page out once, not once per block.
new MutationObserver(function (changes) {
  var wide = changes.map(function (change) { return change.target; })
    .filter(function (code) {
      return !code.hasAttribute("tabindex") && code.scrollWidth > code.clientWidth;
    });
  wide.forEach(function (code) { code.setAttribute("tabindex", "0"); });
}).observe(document.body, {subtree: true, attributes: true, attributeFilter: ["tabindex"]});
