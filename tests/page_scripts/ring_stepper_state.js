// The step's name and sentence, each rank's chunks (label, values, arrived, "new"), where
// the ring and buttons are drawn, each arrow's send and the cards nearest its two ends.
root => {
    const cards = [...root.querySelectorAll('.ring-stepper__rank')];
    const nearest = (path, at) => {
        const point = path.getPointAtLength(at).matrixTransform(path.getScreenCTM());
        const away = cards.map(card => {
            const box = card.getBoundingClientRect();
            return Math.hypot(Math.max(box.left - point.x, 0, point.x - box.right),
                              Math.max(box.top - point.y, 0, point.y - box.bottom));
        });
        return away.indexOf(Math.min(...away));
    };
    const box = part => root.querySelector(`.ring-stepper__${part}`).getBoundingClientRect();
    // Where the ring and the buttons sit inside the stepper: a figure loading above it
    // moves the whole stepper in the viewport, which is no step moving the ring.
    const top = root.getBoundingClientRect().top;
    return {
        position: root.querySelector('.ring-stepper__position').textContent,
        status: root.querySelector('.ring-stepper__status').textContent,
        ring: [box('figure').top - top, box('figure').bottom - top],
        controls: box('controls').bottom - top,
        ranks: cards.map(card => [...card.querySelectorAll('.ring-stepper__chunk')]
            .map(chunk => [chunk.querySelector('.ring-stepper__sums').textContent,
                           chunk.querySelector('.ring-stepper__values').textContent,
                           chunk.classList.contains('ring-stepper__chunk--arrived'),
                           chunk.querySelector('.ring-stepper__new')?.textContent ?? ''])),
        arrows: [...root.querySelectorAll('.ring-stepper__arrow')].map(arrow => {
            const path = arrow.querySelector('path');
            return {send: arrow.dataset.send.split(' ').map(Number),
                    label: arrow.querySelector('text').textContent,
                    ends: [nearest(path, 0), nearest(path, path.getTotalLength())]};
        }),
    };
}
