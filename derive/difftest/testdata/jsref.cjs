// Node side of the derive differential test. Reads one JSON object per line
// on stdin, writes one per line on stdout, in order. Every answer comes from
// a library this project did not write (or from V8/ICU's own String
// methods for version 1):
//
//   {"k":"taxid","value":S}  cpf-cnpj-validator (alphanumeric CNPJ) and
//                            @brazilian-utils/brazilian-utils (version 2 =
//                            numeric and alphanumeric CNPJ)
//   {"k":"pix","value":S}    @brazilian-utils getPixKeyInfo (type + DICT form)
//   {"k":"phone","value":S}  libphonenumber-js (max metadata), default BR
//   {"k":"email","value":S}  validator.isEmail and @brazilian-utils isValidEmail
//                            (and validator.isUUID, for random Pix keys)
//   {"k":"v1","rule":R,"value":S} version 1 with String.prototype
//                            normalize/toLowerCase and \p{L}\p{N}
'use strict';
const readline = require('node:readline');
const { cpf, cnpj } = require('cpf-cnpj-validator');
const bu = require('@brazilian-utils/brazilian-utils');
const { parsePhoneNumberFromString } = require('libphonenumber-js/max');
const validator = require('validator');

// Python's str.isspace() set, which str.strip() uses (JS trim() differs:
// it strips U+FEFF and leaves U+001C..U+001F).
const pyStrip = /^[\t\n\v\f\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+|[\t\n\v\f\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+$/g;
const alnum = /[\p{L}\p{N}]/u;

function v1(rule, s) {
  let out;
  switch (rule) {
    case 'text': out = s.normalize('NFC').replace(pyStrip, ''); break;
    case 'ref': out = s.replace(pyStrip, ''); break;
    case 'template': case 'email': out = s.normalize('NFC').replace(pyStrip, '').toLowerCase(); break;
    case 'pix_key': {
      const t = s.normalize('NFC').replace(pyStrip, '');
      out = t.includes('@') ? t.toLowerCase() : Array.from(t).filter((c) => alnum.test(c)).join('').toLowerCase();
      break;
    }
    default: return { error: 'unknown rule' };
  }
  return out === '' ? { error: 'empty' } : { value: out };
}

function answer(o) {
  const v = o.value;
  switch (o.k) {
    case 'taxid': {
      const ccv = cpf.isValid(v) || cnpj.isValid(v);
      return {
        ccv, ccvValue: ccv ? (cpf.isValid(v) ? cpf.strip(v) : cnpj.strip(v)) : '',
        bu: bu.isValidCpf(v) || bu.isValidCnpj(v, { version: 2 }),
      };
    }
    case 'pix': {
      const info = bu.getPixKeyInfo(v);
      return {
        type: info ? info.type : '', value: info ? info.value : '',
        uuid: validator.isUUID(v, 'all'),
      };
    }
    case 'phone': {
      const n = parsePhoneNumberFromString(v, 'BR');
      if (!n) return { error: 'not a number' };
      return { value: n.number, valid: n.isValid(), region: n.country || '', type: n.getType() || '' };
    }
    case 'email':
      return { validator: validator.isEmail(v), bu: bu.isValidEmail(v), uuid: validator.isUUID(v, 'loose') };
    case 'v1':
      return v1(o.rule, v);
  }
  return { error: 'unknown kind' };
}

const out = [];
const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
rl.on('line', (line) => {
  let r;
  try { r = answer(JSON.parse(line)); } catch (e) { r = { error: String(e && e.name) }; }
  out.push(JSON.stringify(r));
  if (out.length >= 1024) { process.stdout.write(out.join('\n') + '\n'); out.length = 0; }
});
rl.on('close', () => { if (out.length) process.stdout.write(out.join('\n') + '\n'); });
