// Each drawn cell's fill and text, and the arrived outline against the card behind it.
root => [...root.querySelectorAll('.ring-stepper__chunk')].map(chunk => ({
    look: chunk.getAttribute('class').split('--')[1].split(' ')[0],
    arrived: chunk.classList.contains('ring-stepper__chunk--arrived'),
    fill: getComputedStyle(chunk.querySelector('rect')).fill,
    ink: getComputedStyle(chunk.querySelector('text')).fill,
    outline: getComputedStyle(chunk.querySelector('rect')).stroke,
    card: getComputedStyle(chunk.closest('.ring-stepper__rank')
                           .querySelector('.ring-stepper__card')).fill,
}))
