// A code block wider than the screen scrolls sideways, and only what takes focus can be
// scrolled from a keyboard. The theme gives such blocks tabindex="0" on devices with a
// mouse and takes it away on touch screens (which can have keyboards too): give it back.
(function () {
  var wide = function (code) { return code.scrollWidth > code.clientWidth; };
  var reachable = function (code) {
    if (!code.hasAttribute("tabindex") && wide(code)) code.setAttribute("tabindex", "0");
  };
  new MutationObserver(function (changes) {
    changes.forEach(function (change) { reachable(change.target); });
  }).observe(document.body, {subtree: true, attributes: true, attributeFilter: ["tabindex"]});
  document.querySelectorAll(".md-typeset pre > code").forEach(reachable);
})();
