// The step-through's parts a reader cannot see whole: its step's name, each rank's card
// and its buttons, each against the viewport below the page's header.
root => {
    const top = document.querySelector('.md-header').getBoundingClientRect().bottom;
    const parts = [['step name', root.querySelector('.ring-stepper__position')],
                   ['buttons', root.querySelector('.ring-stepper__controls')],
                   ...[...root.querySelectorAll('.ring-stepper__rank')].map(
                       card => [`rank ${card.dataset.rank}`, card])];
    return parts.filter(([, part]) => {
        const box = part.getBoundingClientRect();
        return box.top < top || box.bottom > innerHeight || box.left < 0 ||
            box.right > innerWidth;
    }).map(([name]) => name);
}
