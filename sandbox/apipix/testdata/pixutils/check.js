// Reads BR Codes, one per line on standard input, with pix-utils
// (https://github.com/thalesog/pix-utils), and prints for each one JSON
// line: what pix-utils parsed, or its error (an invalid CRC, a malformed
// field, ...).
const { parsePix, hasError } = require('pix-utils');
const input = require('fs').readFileSync(0, 'utf8');
for (const code of input.split('\n').filter((l) => l !== '')) {
  const p = parsePix(code);
  console.log(JSON.stringify(hasError(p) ? { error: p.message || 'error' } : p));
}
