// Package difftest holds the differential test of derive's rules: thousands
// of generated inputs per rule, each normalized by derive and by at least two
// implementations this project did not write, and compared.
//
//   - taxid v3: cpf-cnpj-validator and @brazilian-utils/brazilian-utils
//     (both read the alphanumeric CNPJ of IN RFB 2.229/2024)
//   - pix_key v3: @brazilian-utils getPixKeyInfo, and the per-type libraries
//     (cpf-cnpj-validator, libphonenumber-js, validator.isEmail/isUUID)
//   - phone v3: libphonenumber-js and Google's libphonenumber for Python
//     (Debian's python3-phonenumbers)
//   - email v3: validator.isEmail and @brazilian-utils isValidEmail
//   - version 1 (text, ref, template, email, pix_key, money): CPython's own
//     str.strip/lower/isalnum, unicodedata and decimal (the reference
//     derivation is written in Python), and V8/ICU's String methods
//
// The test prints, per rule and implementation, the inputs, the agreements
// and the allow-listed differences, and fails on any other difference. The
// allow-list is short and says, for each entry, why derive is right.
//
// It needs node with testdata/node_modules (scripts/difftest-deps.sh) and
// /usr/bin/python3 with the phonenumbers module; without them it fails, it
// never skips. It has no non-test code.
package difftest
