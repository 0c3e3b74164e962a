// A code block that can be wider than a phone is built focusable (tabindex="0", marked
// data-wide: scripts/pages/layout.py decides from its longest line), because only what
// takes focus can be scrolled from a keyboard. On a screen without hover the theme takes
// tabindex away again, and touch screens can have keyboards too: give it back to the
// marked blocks. Nothing here reads layout, so the theme's start-up is never made to
// lay the page out.
if (!matchMedia("(hover)").matches) {
  new MutationObserver(function (changes) {
    changes.forEach(function (change) {
      var code = change.target;
      if (code.hasAttribute("data-wide") && !code.hasAttribute("tabindex")) {
        code.setAttribute("tabindex", "0");
      }
    });
  }).observe(document.body, {subtree: true, attributes: true, attributeFilter: ["tabindex"]});
}
