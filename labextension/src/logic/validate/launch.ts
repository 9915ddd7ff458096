/**
 * Entry points that run Paddle's own launcher (contract.py `launch_entry`): such a job's trainer
 * starts its ranks itself, which the `ranks_fit` rule and the ranks of the log and charts read.
 */

const LAUNCH_MODULES = new Set(['paddle.distributed.launch', 'paddle.distributed.launch.main']);

/** The words of `text` as a POSIX shell splits them (Python's `shlex.split`); null when a quote
 * is left open or the text ends in a lone backslash. */
function shellWords(text: string): string[] | null {
  const words: string[] = [];
  let word = '';
  let inWord = false;
  let quote = '';
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quote === "'") {
      if (c === "'") {
        quote = '';
      } else {
        word += c;
      }
    } else if (quote === '"') {
      if (c === '"') {
        quote = '';
      } else if (c === '\\' && (text[i + 1] === '"' || text[i + 1] === '\\')) {
        word += text[++i];
      } else {
        word += c;
      }
    } else if (c === '\\') {
      if (i + 1 >= text.length) {
        return null;
      }
      word += text[++i];
      inWord = true;
    } else if (c === "'" || c === '"') {
      quote = c;
      inWord = true;
    } else if (c === ' ' || c === '\t' || c === '\r' || c === '\n') {
      if (inWord) {
        words.push(word);
        word = '';
        inWord = false;
      }
    } else {
      word += c;
      inWord = true;
    }
  }
  if (quote) {
    return null;
  }
  if (inWord) {
    words.push(word);
  }
  return words;
}

/** True when `entry` runs `python -m paddle.distributed.launch` (or `fleetrun`) as its command. */
export function launchEntry(entry: string): boolean {
  let words = shellWords(entry);
  if (words === null) {
    return false;
  }
  while (
    words.length &&
    (words[0] === 'env' || (words[0].includes('=') && !words[0].startsWith('=')))
  ) {
    words = words.slice(1);
  }
  if (!words.length) {
    return false;
  }
  const program = words[0].split('/').pop() ?? '';
  if (program === 'fleetrun') {
    return true;
  }
  if (!program.startsWith('python')) {
    return false;
  }
  let rest = words.slice(1);
  while (rest.length && rest[0].startsWith('-') && !rest[0].startsWith('-m')) {
    rest = rest.slice(1);
  }
  if (rest.length > 1 && rest[0] === '-m') {
    return LAUNCH_MODULES.has(rest[1]);
  }
  return rest.length > 0 && rest[0].startsWith('-m') && LAUNCH_MODULES.has(rest[0].slice(2));
}
