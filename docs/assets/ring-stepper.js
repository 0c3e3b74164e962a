// The ring, one step at a time, from the recorded trace: the ranks around an ellipse, one
// arrow per send, the chunk that just arrived outlined and marked "new".
//
// The trace is lesson_code/ring.py's (recordings/<lesson>.simulation.json), in the page as
// JSON ({{ json:... }}): nothing is fetched or simulated here. As in the static figures, a
// copy's values are the sum of the contributions the trace says it holds, and the steps
// are "start", then 1 to p - 1, one per send.
(() => {
  "use strict";
  // SVG units (text: 10-unit monospace), drawn at SMALLEST to LARGEST px each (9 px text).
  const CHAR = 6, ROW = 15, PAD = 5, GAP = 24, ARROW = 26, MARGIN = 4;
  const SMALLEST = 0.9, LARGEST = 1.3;
  // CSS px of the screen's height the ring leaves to the header, the step's name and the
  // buttons, so that all three show with it (p = 8 down to a 768-px laptop's 657 px).
  const BESIDE_RING = 200;
  const KEYS = {ArrowLeft: "previous", ArrowRight: "next", Home: "first", End: "last"};

  // An SVG element; recorded text goes in as text only, never as markup.
  function svg(tag, attributes, text) {
    const element = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (const name in attributes) element.setAttribute(name, attributes[name]);
    if (text !== undefined) element.textContent = text;
    return element;
  }

  // Values as Python's format(v, "g") writes them for these numbers (the figure's form).
  const number = (value) => Number.isInteger(value) ? String(value)
    : String(+value.toPrecision(6));

  function chunkValues(trace, summed, chunk) {
    const width = trace.contributions[0].length / trace.ranks, values = [];
    for (let i = 0; i < width; i++) {
      values.push(number(summed.reduce((total, rank) =>
        total + trace.contributions[rank][chunk * width + i], 0)));
    }
    return summed.length ? values.join(", ") : "";
  }

  const cellLabel = (summed, p) => !summed.length ? "—"
    : summed.length === p ? "all" : summed.join("+");

  // Every state a reader can step to: the start of each phase, then each of its steps.
  function states(trace) {
    const p = trace.ranks, everyone = [...Array(p).keys()], all = [];
    for (const [phase, run] of [["Reduce-scatter", trace.reduceScatter],
                                ["All-gather", trace.allGather]]) {
      // The all-gather moves finished sums: a copy it holds carries every contribution.
      const sums = (state) => phase === "Reduce-scatter" ? state
        : state.map((row) => row.map((held) => held.length ? everyone : []));
      let sent = 0;  // bytes rank 0 has sent in this phase, counted from the trace's sends
      all.push({phase, step: 0, state: sums(run.initial), sends: [], sent,
                phaseBytes: run.bytesSent[0]});
      run.steps.forEach((step, index) => {
        sent += step.sends.filter((send) => !send[0]).length * trace.vectorBytes / p;
        all.push({phase, step: index + 1, state: sums(step.state), sends: step.sends, sent,
                  phaseBytes: run.bytesSent[0]});
      });
    }
    return all;
  }

  // What the live region says: the sends, what each arriving chunk now holds, the bytes.
  function sentence(trace, at) {
    const p = trace.ranks, adds = at.phase === "Reduce-scatter";
    if (!at.step) {
      return `${adds ? "Every rank holds only its own contribution to every chunk."
        : "Rank r holds its finished chunk r and nothing else."} Each of the ${p - 1} steps ` +
        `has every rank send one ${trace.vectorBytes / p}-byte chunk: ${at.phaseBytes} ` +
        `bytes per rank in the ${at.phase.toLowerCase()}.`;
    }
    const arrivals = at.sends.map(([from, to, c]) => {
      const held = at.state[to][c];
      return `c${c} from rank ${from} to rank ${to}, ${!adds ? "finished"
        : held.length === p ? "now fully reduced" : "now ranks " + cellLabel(held, p)} ` +
        `(${chunkValues(trace, held, c)})`;
    });
    return `Each rank ${adds ? "sends one chunk to the next, which adds it to its copy"
      : "forwards one finished chunk to the next, which stores a copy"}: ` +
      `${arrivals.join("; ")}. Each rank has sent ${at.sent} of its ${at.phaseBytes} bytes.`;
  }

  // The part of the ring between two cards, from the sender's edge to the receiver's.
  function between([rx, ry], from, to, card) {
    const point = (angle) => [rx * Math.cos(angle), ry * Math.sin(angle)];
    const inside = (angle, spot) => {
      const [x, y] = point(angle);
      return Math.abs(x - spot.x) < card.w / 2 + 2 && Math.abs(y - spot.y) < card.h / 2 + 2;
    };
    let a = from.angle, b = to.angle <= a ? to.angle + 2 * Math.PI : to.angle;
    while (a < b && inside(a, from)) a += 0.005;
    while (b > a && inside(b, to)) b -= 0.005;
    return {wide: b - a > Math.PI, start: point(a), end: point(b), middle: point((a + b) / 2)};
  }

  // The ring's line on an ellipse of these radii, and each send's arrow along it with the
  // point for its chunk's name: inside the ring beside it, or on it where a card is in the way.
  function onEllipse(radii, spots, card) {
    return {
      loop: `M${radii[0]} 0A${radii} 0 1 1 ${-radii[0]} 0A${radii} 0 1 1 ${radii[0]} 0`,
      send(from, to) {
        const arc = between(radii, spots[from], spots[to], card);
        const inward = 1 - 13 / Math.hypot(...arc.middle);
        let [x, y] = arc.middle.map((v) => v * inward);
        if (spots.some((spot) => Math.abs(x - spot.x) < card.w / 2 + 10 &&
                       Math.abs(y - spot.y) < card.h / 2 + 8)) [x, y] = arc.middle;
        return {d: `M${arc.start}A${radii} 0 ${+arc.wide} 1 ${arc.end}`, x, y};
      },
    };
  }

  // The ranks one under another, a short arrow down from each to the next and the last's
  // send back up the right side to rank 0, each chunk's name beside its arrow.
  function column(p, {w, h}) {
    const back = w / 2 + 14, pitch = h + ARROW + 8;
    const spots = [...Array(p).keys()].map((r) => ({x: 0, y: (r - (p - 1) / 2) * pitch}));
    const [top, bottom] = [spots[0].y, spots[p - 1].y];
    return {spots, width: 2 * (back + 9 + MARGIN), height: bottom - top + h + 2 * MARGIN,
            loop: `M0 ${top}V${bottom}H${back}V${top}Z`,
            send: (from, to) => to === from + 1
              ? {d: `M0 ${spots[from].y + h / 2}V${spots[to].y - h / 2}`, x: 16,
                 y: (spots[from].y + spots[to].y) / 2}
              : {d: `M${w / 2} ${bottom}H${back}V${top}H${w / 2}`, x: back, y: 0}};
  }

  // Where the p cards sit: on an ellipse, rank 0 at the top and the ranks clockwise (a flat
  // top packs 8 cards into the page's column), just large enough that no two cards touch,
  // neighbours are GAP apart corner to corner and each arrow shows ARROW long between them.
  // The first that fits at full size, across the column (room) and down the screen (tall),
  // from as round as a page is wide (height 0.8 of the width) to taller ones, then flatter
  // ones (p = 8 on a short laptop screen); else the one drawn largest, any that fits the
  // column at the smallest size first (none does for p = 8 on a phone: the narrowest, which
  // scrolls in its box and opens on rank 0 and the ranks after it). Where even they are
  // wider than the column (p = 8 at 320 px), the ranks go in one column, none cut.
  function ring(p, card, room, tall) {
    const {w, h} = card, turn = p > 4 ? Math.PI / p : 0;
    const place = (radii) => {
      const spots = [...Array(p).keys()].map((r) => {
        const angle = 2 * Math.PI * r / p - Math.PI / 2 + turn;
        return {x: radii[0] * Math.cos(angle), y: radii[1] * Math.sin(angle), angle};
      });
      return spots.every((a, i) => {
        const next = spots[(i + 1) % p], arc = between(radii, a, next, card);
        return Math.hypot(arc.end[0] - arc.start[0], arc.end[1] - arc.start[1]) >= ARROW &&
          Math.hypot(Math.max(0, Math.abs(a.x - next.x) - w),
                     Math.max(0, Math.abs(a.y - next.y) - h)) >= GAP &&
          spots.every((b, j) => i === j || Math.abs(a.x - b.x) >= w + 4 ||
                      Math.abs(a.y - b.y) >= h + 4);
      }) && spots;
    };
    // The canvas holds every card and the ring itself (whose sides p = 2 leaves bare).
    const extent = (radius, spots, axis, size) => 2 * (MARGIN + Math.max(radius + 2,
      ...spots.map((spot) => (axis ? spot.y : spot.x) + size / 2)));
    const size = (shape) => Math.min(room / shape.width, tall / shape.height) -
      (SMALLEST * shape.width > room);
    let best = null;
    for (const k of [0.8, 0.9, 1, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 0.7, 0.6, 0.5]) {
      let radii, spots = null;
      for (let rx = w / 4; !spots; rx *= 1.01) {
        // Two ranks sit one above the other: the ring's sides must show beside them.
        radii = [p === 2 ? Math.max(rx, w / 2 + ARROW) : rx, k * rx];
        spots = place(radii);
      }
      const shape = {spots, width: extent(radii[0], spots, 0, w),
                     height: extent(radii[1], spots, 1, h), ...onEllipse(radii, spots, card)};
      if (size(shape) >= 1) return shape;
      if (!best || size(shape) > size(best) + 0.001) best = shape;
    }
    const opening = best.width / 2 - best.spots[0].x + w / 2 + MARGIN;
    return SMALLEST * opening > room ? column(p, card) : best;
  }

  function drawRing(trace, at, card, shape, id) {
    const p = trace.ranks, {w, h} = card, {width, height} = shape;
    const root = svg("svg", {viewBox: `${-width / 2} ${-height / 2} ${width} ${height}`,
                             role: "group", "aria-label": "Ranks on the ring"});
    const marker = svg("marker", {id: `${id}-head`, viewBox: "0 0 10 10", refX: 9, refY: 5,
                                  markerWidth: 7, markerHeight: 7, orient: "auto"});
    marker.append(svg("path", {d: "M0 0L10 5L0 10z", class: "ring-stepper__head"}));
    const sends = svg("g", {"aria-hidden": "true"});  // the live region says the same
    root.append(marker, svg("path", {d: shape.loop, class: "ring-stepper__ring"}), sends);
    const got = {};
    // One arrow per send, along the ring from the sender's card to the receiver's, and the
    // chunk's name beside it.
    for (const send of at.sends) {
      const [from, to, c] = send;
      got[to] = c;
      const {d, x, y} = shape.send(from, to);
      const arrow = svg("g", {class: "ring-stepper__arrow", "data-send": send.join(" ")});
      arrow.append(svg("path", {d, pathLength: 1, "marker-end": `url(#${id}-head)`}),
                   svg("rect", {x: x - 9, y: y - 7, width: 18, height: 14, rx: 3}),
                   svg("text", {x, y: y + 3.5, "text-anchor": "middle"}, `c${c}`));
      sends.append(arrow);
    }
    shape.spots.forEach((spot, r) => {
      const group = svg("g", {class: "ring-stepper__rank", "data-rank": r,
                             transform: `translate(${spot.x - w / 2} ${spot.y - h / 2})`});
      const list = svg("g", {role: "list", "aria-label": `rank ${r}`});
      group.append(svg("rect", {width: w, height: h, rx: 4, class: "ring-stepper__card"}),
                  svg("text", {x: PAD, y: ROW - 3.5, class: "ring-stepper__name"}, `rank ${r}`),
                  list);
      at.state[r].forEach((summed, c) => {
        const look = !summed.length ? "missing" : summed.length === p ? "full"
          : summed.length === 1 ? "own" : "partial";
        const item = svg("g", {role: "listitem", "data-chunk": c,
                               transform: `translate(0 ${(c + 1) * ROW})`,
                               class: `ring-stepper__chunk ring-stepper__chunk--${look}`});
        const columns = [[PAD, `c${c}`, "label"], [PAD + 3 * CHAR, cellLabel(summed, p), "sums"],
                         [w - PAD - 4 * CHAR, chunkValues(trace, summed, c), "values"]];
        if (got[r] === c) {
          item.classList.add("ring-stepper__chunk--arrived");
          columns.push([w - PAD, "new", "new"]);
        }
        item.append(svg("rect", {x: 2, width: w - 4, height: ROW - 2, rx: 2}),
                    ...columns.map(([x, text, name]) =>
                      svg("text", {x, y: ROW - 5, class: `ring-stepper__${name}`}, text)));
        list.append(item);
      });
      root.append(group);
    });
    return root;
  }

  // The controls are the page's (docs/sections/ring-stepper.html); the ring sizes, numbers,
  // the trace's.
  function mount(root) {
    const id = root.dataset.trace, source = document.getElementById(id);
    if (!source) return;
    const recorded = JSON.parse(source.textContent), pace = +root.dataset.paceMs;
    // The trace the figures draw, and those of the other ring sizes.
    const traces = {[recorded.ranks]: recorded, ...recorded.byRanks};
    const part = (name) => root.querySelector(`.ring-stepper__${name}`);
    const status = part("status"), figure = part("figure"), cue = part("scroll");
    const button = (go) => root.querySelector(`[data-go=${go}]`);
    for (const ranks of Object.keys(traces).map(Number).sort((a, b) => a - b)) {
      const label = document.createElement("label"), input = document.createElement("input");
      Object.assign(input, {type: "radio", name: `${id}-ranks`, value: ranks,
                            checked: ranks === recorded.ranks});
      label.append(input, ` p = ${ranks}`);
      part("choice").append(label);
    }

    let trace, all, card, shape, at = 0, timer = null;
    function load(ranks) {
      trace = traces[ranks];
      all = states(trace);
      // A card is as wide as its longest line (monospace): "c0 ", sums, "  ", values, " new".
      const cells = all.flatMap((state) => state.state.flat().map((summed, i) =>
        [cellLabel(summed, trace.ranks).length,
         chunkValues(trace, summed, i % trace.ranks).length]));
      card = {w: 2 * PAD + CHAR * (9 + Math.max(3, ...cells.map((cell) => cell[0])) +
                                   Math.max(1, ...cells.map((cell) => cell[1]))),
              h: (trace.ranks + 1) * ROW + 4};
      shape = null;
    }
    function draw() {
      const room = figure.clientWidth, tall = innerHeight - BESIDE_RING;
      // A phone's height changes as its address bar hides: that redraws, it does not scroll.
      const fresh = !shape || shape.room !== room;
      if (fresh || shape.tall !== tall) shape = {...ring(trace.ranks, card, room, tall), room, tall};
      const drawn = drawRing(trace, all[at], card, shape, id);
      // As large as there is room for, across and down, within SMALLEST and LARGEST. A ring
      // wider than that (p = 8 on a phone) scrolls in its box, which then takes focus and
      // says so.
      const width = Math.max(SMALLEST * shape.width, Math.min(
        room, LARGEST * shape.width, tall * shape.width / shape.height));
      drawn.style.width = `${width}px`;
      figure.replaceChildren(drawn);
      const scrolls = width > room;
      cue.hidden = !scrolls;
      if (scrolls) figure.tabIndex = 0;
      else figure.removeAttribute("tabindex");
      // It opens on rank 0's card (top right), the rank the sentence starts with.
      if (fresh && scrolls) {
        figure.scrollLeft = (shape.spots[0].x - card.w / 2 + shape.width / 2) *
          width / shape.width - MARGIN;
      }
    }
    function show(index) {
      at = Math.max(0, Math.min(all.length - 1, index));
      const state = all[at];
      part("position").textContent = state.phase + (state.step
        ? `, step ${state.step} of ${trace.ranks - 1}` : ", start");
      status.textContent = sentence(trace, state);
      draw();
      // Marked, not disabled: a disabled button would drop the keyboard focus (to <body>).
      for (const go of ["first", "previous"]) button(go).ariaDisabled = at === 0;
      for (const go of ["next", "last"]) button(go).ariaDisabled = at === all.length - 1;
    }
    // While it plays only the step's name is announced, not its sentence (70 to 120
    // words, every 2.5 s).
    function play(on) {
      clearInterval(timer);
      timer = null;
      if (on) {
        if (at === all.length - 1) show(0);
        timer = setInterval(() => {
          show(at + 1);
          if (at === all.length - 1) play(false);
        }, pace);
      }
      button("play").textContent = on ? "Pause" : "Play";
      status.ariaLive = on ? "off" : "polite";
    }
    const moves = {first: () => 0, previous: () => at - 1, next: () => at + 1,
                   last: () => all.length - 1};
    function go(name) {
      if (name === "play") return play(!timer);
      play(false);
      show(moves[name]());
    }
    part("controls").addEventListener("click", (event) => {
      const name = event.target.dataset.go;
      if (name && event.target.ariaDisabled !== "true") go(name);
    });
    root.addEventListener("keydown", (event) => {
      const name = KEYS[event.key];
      // Arrows choose among the radios, and scroll the ring's box when it scrolls.
      if (!name || event.target.type === "radio" || event.target === figure) return;
      event.preventDefault();
      go(name);
    });
    part("choice").addEventListener("change", (event) => {
      play(false);
      load(event.target.value);
      show(0);
    });
    addEventListener("resize", draw);
    load(recorded.ranks);
    root.hidden = false;
    show(0);
  }

  document.querySelectorAll(".ring-stepper[data-trace]").forEach(mount);
})();
