/**
 * The console's one style sheet, served by the API at /console/assets/console.css (no CDN, no
 * inline style: the Content-Security-Policy allows styles from 'self' only). Focus is always
 * visible: the console is usable with the keyboard alone.
 */
export const CONSOLE_CSS = `
:root { --fg: #1b1f24; --muted: #57606a; --line: #d0d7de; --accent: #0b5cad; --bad: #a40e26; --good: #116329; --bg: #ffffff; --soft: #f6f8fa; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, sans-serif; color: var(--fg); background: var(--bg); }
header { display: flex; gap: 1rem; align-items: center; padding: .6rem 1rem; border-bottom: 1px solid var(--line); background: var(--soft); }
header .who { margin-left: auto; color: var(--muted); }
header form { display: inline; }
main { padding: 1rem; max-width: 80rem; }
h1 { font-size: 1.3rem; margin: .2rem 0 1rem; }
h2 { font-size: 1.05rem; margin: 1.5rem 0 .5rem; }
a { color: var(--accent); }
a:focus-visible, button:focus-visible, input:focus, input:focus-within, select:focus { outline: 3px solid #f0a000; outline-offset: 2px; }
table { border-collapse: collapse; width: 100%; margin-bottom: .5rem; }
th, td { text-align: left; padding: .3rem .5rem; border-bottom: 1px solid var(--line); vertical-align: top; }
th { color: var(--muted); font-weight: 600; }
code, .mono { font-family: ui-monospace, monospace; font-size: 12.5px; word-break: break-all; }
form.filters { display: grid; grid-template-columns: repeat(auto-fill, minmax(12rem, 1fr)); gap: .5rem 1rem; margin-bottom: 1rem; align-items: end; }
label { display: flex; flex-direction: column; gap: .15rem; color: var(--muted); }
input, select, button { font: inherit; padding: .35rem .5rem; border: 1px solid var(--line); border-radius: 4px; color: var(--fg); background: var(--bg); }
button { background: var(--accent); color: #fff; border-color: var(--accent); cursor: pointer; }
button.secondary { background: var(--bg); color: var(--accent); }
.notice { padding: .6rem .8rem; border: 1px solid var(--line); border-radius: 4px; background: var(--soft); margin-bottom: 1rem; }
.notice.bad { border-color: var(--bad); color: var(--bad); }
.notice.good { border-color: var(--good); color: var(--good); }
.pager { display: flex; gap: 1rem; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1rem; }
dt { color: var(--muted); }
dd { margin: 0; }
header nav { display: flex; gap: .8rem; flex-wrap: wrap; }
.muted { color: var(--muted); }
form.inline { display: inline; }
.plots { display: grid; grid-template-columns: repeat(auto-fill, minmax(30rem, 1fr)); gap: 1rem; }
.plots h2 { grid-column: 1 / -1; }
figure.plot { margin: 0; border: 1px solid var(--line); border-radius: 4px; padding: .5rem; }
figure.plot figcaption { font-weight: 600; margin-bottom: .3rem; }
figure.plot svg { width: 100%; height: auto; display: block; }
.plot .axis { stroke: var(--muted); stroke-width: 1; }
.plot .grid { stroke: var(--line); stroke-width: 1; stroke-dasharray: 4 4; }
.plot .tick { fill: var(--muted); font-size: 11px; }
.plot .line { fill: none; stroke-width: 2; }
.legend { list-style: none; display: flex; gap: 1rem; flex-wrap: wrap; padding: 0; margin: .3rem 0 0; }
.swatch { display: inline-block; width: .9rem; height: .9rem; border-radius: 2px; margin-right: .3rem; vertical-align: middle; }
.s0 { stroke: #0b5cad; fill: #0b5cad; background: #0b5cad; }
.s1 { stroke: #c2410c; fill: #c2410c; background: #c2410c; }
.s2 { stroke: #116329; fill: #116329; background: #116329; }
.s3 { stroke: #7e22ce; fill: #7e22ce; background: #7e22ce; }
.s4 { stroke: #a40e26; fill: #a40e26; background: #a40e26; }
.s5 { stroke: #0e7490; fill: #0e7490; background: #0e7490; }
.s6 { stroke: #854d0e; fill: #854d0e; background: #854d0e; }
.s7 { stroke: #57606a; fill: #57606a; background: #57606a; }
.plot .line.s0, .plot .line.s1, .plot .line.s2, .plot .line.s3, .plot .line.s4, .plot .line.s5, .plot .line.s6, .plot .line.s7 { fill: none; }
.signin { max-width: 24rem; margin: 4rem auto; display: flex; flex-direction: column; gap: .8rem; }
`;
