// The ring, one step at a time: reduce-scatter, then all-gather, from the recorded trace.
//
// The trace is lesson_code/ring.py's, as `python scripts/record.py` recorded it
// (recordings/<lesson>.simulation.json); the build puts it into the page as a
// <script type="application/json"> element ({{ json:... }} in scripts/pages/hooks.py), so
// nothing is fetched and nothing is simulated here. Like the static figures, a copy's
// values are the sum of the contributions the trace says it holds. Without script the
// figures above and below say the same; this element stays hidden.
(function () {
  "use strict";

  function text(tag, className, content) {
    var element = document.createElement(tag);
    if (className) element.className = className;
    if (content !== undefined) element.textContent = content;
    return element;
  }

  // Values as Python's format(v, "g") writes them for these numbers (the figure's form).
  function number(value) {
    return Number.isInteger(value) ? String(value) : String(+value.toPrecision(6));
  }

  function chunkValues(trace, summed, chunk) {
    var p = trace.ranks, width = trace.contributions[0].length / p, values = [];
    for (var i = 0; i < width; i++) {
      var total = 0;
      summed.forEach(function (rank) { total += trace.contributions[rank][chunk * width + i]; });
      values.push(total);
    }
    return values;
  }

  // Every state a reader can step to: the start of each phase, then each of its steps.
  function states(trace) {
    var p = trace.ranks, all = [];
    for (var r = 0, everyone = []; r < p; r++) everyone.push(r);
    [["reduce-scatter", trace.reduceScatter], ["all-gather", trace.allGather]]
      .forEach(function (pair) {
        var name = pair[0], phase = pair[1];
        // The all-gather moves finished sums: a copy it holds carries every contribution.
        var sums = name === "all-gather"
          ? function (state) { return state.map(function (row) {
            return row.map(function (held) { return held.length ? everyone : []; }); }); }
          : function (state) { return state; };
        all.push({phase: name, step: 0, state: sums(phase.initial), sends: [],
                  phaseBytes: phase.bytesSent});
        phase.steps.forEach(function (step, index) {
          all.push({phase: name, step: index + 1, state: sums(step.state), sends: step.sends,
                    phaseBytes: phase.bytesSent});
        });
      });
    // How many chunks rank r has sent in its phase up to each state, counted in the trace.
    var counts = [];
    all.forEach(function (state, index) {
      var before = state.step === 0 ? everyone.map(function () { return 0; })
        : counts[index - 1].slice();
      state.sends.forEach(function (send) { before[send[0]] += 1; });
      counts.push(before);
      state.chunksSent = before;
    });
    return all;
  }

  function cellLabel(summed, p) {
    if (!summed.length) return "—";
    return summed.length === p ? "all" : summed.join("+");
  }

  function sentence(trace, at, bytesSoFar) {
    var p = trace.ranks, steps = p - 1;
    var phaseName = at.phase === "reduce-scatter" ? "Reduce-scatter" : "All-gather";
    if (at.step === 0) {
      return phaseName + ", start: " + (at.phase === "reduce-scatter"
        ? "every rank holds only its own contribution to every chunk."
        : "rank r holds its finished chunk r and nothing else.");
    }
    var moves = at.sends.map(function (send) {
      return "rank " + send[0] + " sends c" + send[2] + " to rank " + send[1];
    }).join(", ");
    var done = at.phase === "reduce-scatter" ? "each adds what it got" : "each stores a copy";
    return phaseName + ", step " + at.step + " of " + steps + ": " + moves + "; " + done +
      ". Each rank has sent " + bytesSoFar + " of " + at.phaseBytes[0] + " bytes.";
  }

  function mount(root) {
    var source = document.getElementById(root.getAttribute("data-trace"));
    if (!source) return;
    var recorded = JSON.parse(source.textContent);
    // The trace the figures draw, and those of the other ring sizes (lesson_code/ring.py).
    var traces = {};
    traces[recorded.ranks] = recorded;
    Object.keys(recorded.byRanks || {}).forEach(function (ranks) {
      traces[ranks] = recorded.byRanks[ranks];
    });
    var trace, p, chunkBytes, all, at = 0;
    function load(ranks) {
      trace = traces[ranks];
      p = trace.ranks;
      chunkBytes = trace.vectorBytes / p;
      all = states(trace);
    }
    load(recorded.ranks);

    var choice = text("fieldset", "ring-stepper__choice");
    choice.appendChild(text("legend", "", "Ranks on the ring"));
    Object.keys(traces).map(Number).sort(function (a, b) { return a - b; })
      .forEach(function (ranks) {
        var label = text("label"), input = text("input");
        input.type = "radio";
        input.name = root.getAttribute("data-trace") + "-ranks";
        input.value = ranks;
        input.checked = ranks === recorded.ranks;
        label.append(input, " p = " + ranks);
        choice.appendChild(label);
      });
    choice.addEventListener("change", function (event) {
      load(event.target.value);
      show(0);
    });

    var controls = text("div", "ring-stepper__controls");
    var buttons = {};
    [["first", "Start"], ["previous", "Previous step"], ["next", "Next step"],
     ["last", "End"]].forEach(function (pair) {
      var button = text("button", "md-button", pair[1]);
      button.type = "button";
      button.setAttribute("data-go", pair[0]);
      buttons[pair[0]] = button;
      controls.appendChild(button);
    });
    var position = text("p", "ring-stepper__position");
    var status = text("p", "ring-stepper__status");
    status.setAttribute("aria-live", "polite");
    var grid = text("div", "ring-stepper__ranks");
    var bytes = text("p", "ring-stepper__bytes");
    root.append(choice, controls, position, status, grid, bytes);

    function show(index) {
      at = Math.max(0, Math.min(all.length - 1, index));
      var state = all[at];
      var got = {}, sent = {};
      state.sends.forEach(function (send) {
        sent[send[0]] = send; got[send[1]] = send;
      });
      var bytesSoFar = state.chunksSent[0] * chunkBytes;
      position.textContent = (state.phase === "reduce-scatter" ? "Reduce-scatter" : "All-gather")
        + (state.step ? ", step " + state.step + " of " + (p - 1) : ", start")
        + " (" + (at + 1) + " of " + all.length + ")";
      status.textContent = sentence(trace, state, bytesSoFar);
      grid.textContent = "";
      for (var r = 0; r < p; r++) {
        var card = text("div", "ring-stepper__rank");
        card.setAttribute("data-rank", r);
        card.appendChild(text("p", "ring-stepper__name", "rank " + r));
        var chunks = text("ul", "ring-stepper__chunks");
        for (var c = 0; c < p; c++) {
          var summed = state.state[r][c];
          var look = !summed.length ? "missing" : summed.length === p ? "full"
            : summed.length === 1 ? "own" : "partial";
          var item = text("li", "ring-stepper__chunk ring-stepper__chunk--" + look);
          if (got[r] && got[r][2] === c) item.classList.add("ring-stepper__chunk--arrived");
          item.setAttribute("data-chunk", c);
          item.append(text("span", "ring-stepper__chunk-name", "c" + c),
                      text("span", "ring-stepper__sums", cellLabel(summed, p)),
                      text("span", "ring-stepper__values", summed.length
                        ? chunkValues(trace, summed, c).map(number).join(", ") : ""));
          chunks.appendChild(item);
        }
        card.appendChild(chunks);
        if (sent[r]) {
          var move = text("p", "ring-stepper__move");
          move.append(text("span", "", "sent c" + sent[r][2] + " → r" + sent[r][1]),
                      text("span", "", "got c" + got[r][2] + " ← r" + got[r][0]));
          card.appendChild(move);
        }
        grid.appendChild(card);
      }
      bytes.textContent = "Bytes each rank has sent in the " + state.phase + ": " +
        bytesSoFar + " of " + state.phaseBytes[0] + " (the model's (p − 1)/p · G = " +
        (p - 1) + "/" + p + " · " + trace.vectorBytes + " B = " +
        (p - 1) * trace.vectorBytes / p + " B)";
      buttons.first.disabled = buttons.previous.disabled = at === 0;
      buttons.next.disabled = buttons.last.disabled = at === all.length - 1;
    }

    var moves = {first: function () { return 0; }, previous: function () { return at - 1; },
                 next: function () { return at + 1; },
                 last: function () { return all.length - 1; }};
    var keys = {ArrowLeft: "previous", ArrowRight: "next", Home: "first", End: "last"};
    controls.addEventListener("click", function (event) {
      var go = event.target.getAttribute && event.target.getAttribute("data-go");
      if (go) show(moves[go]());
    });
    root.addEventListener("keydown", function (event) {
      var go = keys[event.key];
      if (!go || event.target.type === "radio") return;  // arrows choose among radios
      event.preventDefault();
      show(moves[go]());
      // A button that became disabled would drop the focus: keep it in the step-through.
      if (document.activeElement && document.activeElement.disabled) root.focus();
    });
    root.hidden = false;
    show(0);
  }

  document.querySelectorAll(".ring-stepper[data-trace]").forEach(mount);
})();
