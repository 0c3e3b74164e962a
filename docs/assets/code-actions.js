// The theme's copy button (content.code.copy) sits in an unnamed <nav> per code block, made
// as each block first comes into view (content.lazy). A page of many blocks then holds
// many navigation landmarks alike, which a screen reader lists among the page's regions
// and axe reports (landmark-unique), though they lead nowhere: each is made a plain
// container (role none), and its button keeps its own name.
(() => {
  const plain = (node) => {
    if (node.nodeType !== 1) return;
    for (const nav of node.matches("nav.md-code__nav") ? [node]
      : node.querySelectorAll("nav.md-code__nav")) nav.setAttribute("role", "none");
  };
  new MutationObserver((changes) => changes.forEach((change) =>
    change.addedNodes.forEach(plain))).observe(document.body, {subtree: true, childList: true});
  plain(document.body);
})();
