// Hold the theme's request for the search index until the reader first opens search
// (the search toggle turns on) or focuses the search box; then send it. A page reached
// from a search result (?h=term, the theme's search.highlight) needs the index at once to
// mark the term, so there nothing is held. The theme asks with XMLHttpRequest, once per
// page; every other request goes out untouched.
(function () {
  var open = XMLHttpRequest.prototype.open, send = XMLHttpRequest.prototype.send;
  var held = [], wanted = new URLSearchParams(location.search).has("h");
  function release() {
    if (wanted) return;
    wanted = true;
    held.splice(0).forEach(function (sendNow) { sendNow(); });
  }
  XMLHttpRequest.prototype.open = function (method, url) {
    this.isSearchIndex = /\/search\/search_index\.json$/.test(url);
    return open.apply(this, arguments);
  };
  XMLHttpRequest.prototype.send = function () {
    var request = this, args = arguments;
    if (request.isSearchIndex && !wanted) {
      held.push(function () { send.apply(request, args); });
    } else {
      send.apply(request, args);
    }
  };
  document.addEventListener("change", function (event) {
    if (event.target.matches("[data-md-toggle=search]") && event.target.checked) release();
  });
  document.addEventListener("focusin", function (event) {
    if (event.target.matches("[data-md-component=search-query]")) release();
  });
})();
