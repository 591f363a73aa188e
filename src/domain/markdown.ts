// The Temporal UI renders a run's summary and details as markdown with SmartyPants (its server's
// /render: `--evict` becomes an en dash, `...` an ellipsis, `1/2` a fraction, `*x*` emphasis).
// literalMarkdown escapes only what that renderer would change, so the text reads as written in
// the UI and stays readable where it is shown raw (`temporal workflow describe`).
//
// Dashes are kept apart rather than escaped: a backslash before the second `-` showed in the raw
// text (`temporal workflow describe` printed `serves up x -\-evict`), so the dashes of `--evict`
// are kept apart by a word joiner (U+2060), which neither view shows and SmartyPants does not read
// as a dash. A flag copied from either view carries it, as the escaped form carried its backslash.
//
// Straight quotes are the exception: that renderer curls every " and ', backslash-escaped or
// written as an entity (test/summary-markdown.test.ts shows it), so the operator's words avoid them.

/** Between two dashes: invisible, not a space (no line breaks there), and not a dash to SmartyPants. */
export const WORD_JOINER = '\u2060';

/** Always escaped: inline markup (code, emphasis, links, HTML, strikethrough) and the escape itself. */
const ALWAYS = new Set(['\\', '`', '*', '[', ']', '<', '>', '~', '&', '|']);

const isWordChar = (c: string | undefined): boolean => c !== undefined && /[A-Za-z0-9]/.test(c);
const isDigit = (c: string | undefined): boolean => c !== undefined && c >= '0' && c <= '9';

function escapeLine(line: string): string {
  // Leading blanks would make a code block; the UI collapses them anyway.
  const s = line.replace(/^[ \t]+/, '');
  let out = '';
  for (let i = 0; i < s.length; i++) {
    const c = s.charAt(i);
    const prev = i > 0 ? s.charAt(i - 1) : undefined;
    const next = s.charAt(i + 1) || undefined;
    const rest = s.slice(i);
    if (ALWAYS.has(c)) out += `\\${c}`;
    // Emphasis: an underscore inside a word (gpu_role) is text already.
    else if (c === '_') out += isWordChar(prev) && isWordChar(next) ? c : '\\_';
    // An ordered list item at the start of a line: `1.` or `1)`.
    else if ((c === '.' || c === ')') && /^\d+$/.test(s.slice(0, i)) && (next === ' ' || next === undefined)) out += `\\${c}`;
    // Dashes: `--` and `---` become en and em dashes; a lone `-` is a hyphen, or a list item at the start.
    else if (c === '-') out += i === 0 && (next === ' ' || next === undefined) ? '\\-' : prev === '-' ? `${WORD_JOINER}-` : c;
    // Ellipsis: `...` and `. . .`.
    else if (c === '.') out += prev === '.' || (prev === ' ' && s.charAt(i - 2) === '.') ? '\\.' : c;
    // (c), (r), (tm) become symbols.
    else if (c === '(' && /^\((c|r|tm)\)/i.test(rest)) out += '\\(';
    // Fractions: a word 1/2 becomes a superscript and subscript. `/` has no backslash escape: a character reference.
    else if (c === '/' && isDigit(next) && /(^|[^A-Za-z0-9])\d+$/.test(s.slice(0, i))) out += '&#47;';
    // Autolinks: http://, mailto:.
    else if (c === ':' && (next === '/' || /mailto$/i.test(s.slice(0, i)))) out += '\\:';
    // Block markup at the start of a line: a heading, a list item.
    else if (i === 0 && (c === '#' || c === '+')) out += `\\${c}`;
    else out += c;
  }
  return out;
}

/** The text, escaped so that the Temporal UI's markdown shows it as written (straight quotes aside). */
export function literalMarkdown(text: string): string {
  return text.split('\n').map(escapeLine).join('\n');
}
