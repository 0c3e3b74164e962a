() => [...document.querySelectorAll('*')].flatMap(el => [...el.attributes]
    .filter(a => /^\s*javascript:/i.test(a.value)
                 || (a.name.startsWith('on') && /XSS/.test(a.value)))
    .map(a => `${el.tagName} ${a.name}=${a.value}`))
