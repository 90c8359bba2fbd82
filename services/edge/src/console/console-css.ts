/**
 * The console's one stylesheet, served at `/approvals/console.css` (the CSP allows styles from
 * this origin only: no inline style anywhere). Plain, readable, and wide values wrap instead of
 * hiding: every argument must be seen whole.
 */
export const CONSOLE_CSS = `
:root { color-scheme: light dark; --fg: #1b1f24; --bg: #ffffff; --muted: #57606a; --line: #d0d7de; --warn: #9a6700; --bad: #cf222e; --accent: #0969da; }
@media (prefers-color-scheme: dark) { :root { --fg: #e6edf3; --bg: #0d1117; --muted: #8d96a0; --line: #30363d; --warn: #d29922; --bad: #f85149; --accent: #4493f8; } }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: var(--bg); }
header { display: flex; flex-wrap: wrap; gap: 1rem; align-items: center; justify-content: space-between; padding: 0.75rem 1.5rem; border-bottom: 1px solid var(--line); }
header .brand { font-weight: 600; color: var(--fg); text-decoration: none; }
header .who { color: var(--muted); }
header form { display: inline; margin: 0; }
main { max-width: 72rem; margin: 0 auto; padding: 1rem 1.5rem 3rem; }
h1 { font-size: 1.35rem; margin: 1rem 0; overflow-wrap: anywhere; }
h2 { font-size: 1.05rem; margin: 1.75rem 0 0.5rem; }
a { color: var(--accent); }
table { border-collapse: collapse; width: 100%; margin: 0.5rem 0; }
th, td { text-align: left; vertical-align: top; padding: 0.4rem 0.6rem; border-bottom: 1px solid var(--line); }
th { font-weight: 600; color: var(--muted); white-space: nowrap; }
td.value, td.value pre { overflow-wrap: anywhere; }
pre, code { font: 13px/1.45 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
pre { margin: 0; white-space: pre-wrap; word-break: break-all; }
.escaped, .warning { color: var(--warn); }
.warning { border: 1px solid var(--warn); padding: 0.5rem 0.75rem; border-radius: 6px; }
.error { color: var(--bad); border: 1px solid var(--bad); padding: 0.5rem 0.75rem; border-radius: 6px; }
.muted { color: var(--muted); }
form.sign-in { max-width: 28rem; }
label { display: block; margin: 0.75rem 0 0.25rem; font-weight: 600; }
input[type=password], input[type=text] { width: 100%; padding: 0.45rem 0.6rem; font: inherit; border: 1px solid var(--line); border-radius: 6px; background: var(--bg); color: var(--fg); }
button { margin-top: 0.75rem; padding: 0.45rem 1rem; font: inherit; border: 1px solid var(--line); border-radius: 6px; background: var(--accent); color: #fff; cursor: pointer; }
header button { margin: 0; background: transparent; color: var(--fg); }
a.button { display: inline-block; padding: 0.45rem 1rem; border: 1px solid var(--line); border-radius: 6px; background: var(--accent); color: #fff; text-decoration: none; }
form.answer { max-width: 40rem; }
form.answer button { margin-right: 0.75rem; }
button.reject { background: var(--bad); }
h1.result { overflow-wrap: anywhere; }
ul.ways li { margin: 0.35rem 0; overflow-wrap: anywhere; }
`;
