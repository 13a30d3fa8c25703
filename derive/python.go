package derive

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// This file reproduces the three Python string methods the reference
// derivation is written with, so that version 1 gives the reference's
// bytes: str.strip(), str.lower() and str.isalnum(). Go's own functions
// differ in ways that change keys (strings.ToLower has no final sigma and
// maps İ to a bare i; unicode.IsSpace leaves U+001C..U+001F). The
// differential test (derive/difftest) runs CPython on the same inputs.

// pyIsSpace is Python's str.isspace() for one character: Unicode White_Space
// plus the four ASCII information separators U+001C..U+001F, which Python
// counts as white space (bidirectional class B or S) and Go does not.
func pyIsSpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}

// pyStrip is str.strip() with no argument.
func pyStrip(s string) string { return strings.TrimFunc(s, pyIsSpace) }

// pyIsAlnum is str.isalnum() for one character: a letter (Lu, Ll, Lt, Lm,
// Lo) or a character with a numeric value (Nd, Nl, No: Roman numerals,
// superscripts and circled digits included).
func pyIsAlnum(r rune) bool { return unicode.IsLetter(r) || unicode.IsNumber(r) }

// pyLower is str.lower(): the Unicode default full lower-case mapping, with
// its one unconditional multi-character mapping (U+0130 İ -> i + U+0307)
// and the Final_Sigma context for U+03A3 Σ (ς at the end of a word, σ
// elsewhere), exactly as CPython's handle_capital_sigma decides it. The
// language-specific mappings (Turkish, Lithuanian) are not applied, as in
// Python.
func pyLower(s string) string {
	i := 0
	for i < len(s) {
		c := s[i]
		if c >= utf8.RuneSelf || ('A' <= c && c <= 'Z') {
			break
		}
		i++
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteString(s[:i])
	for j, r := range s[i:] {
		j += i
		switch {
		case r < utf8.RuneSelf:
			if 'A' <= r && r <= 'Z' {
				r += 'a' - 'A'
			}
			b.WriteByte(byte(r))
		case r == 0x130:
			b.WriteString("i\u0307")
		case r == 0x3a3:
			if finalSigma(s, j) {
				b.WriteRune(0x3c2)
			} else {
				b.WriteRune(0x3c3)
			}
		default:
			b.WriteRune(unicode.ToLower(r))
		}
	}
	return b.String()
}

// finalSigma reports whether the Σ at byte i of s is in the Final_Sigma
// context: preceded by a cased letter (skipping case-ignorable characters)
// and not followed by one (skipping them too).
func finalSigma(s string, i int) bool {
	j := i
	var prev rune
	found := false
	for j > 0 {
		r, n := utf8.DecodeLastRuneInString(s[:j])
		j -= n
		if !isCaseIgnorable(r) {
			prev, found = r, true
			break
		}
	}
	if !found || !isCased(prev) {
		return false
	}
	for _, r := range s[i+len("Σ"):] {
		if !isCaseIgnorable(r) {
			return !isCased(r)
		}
	}
	return true
}

// isCased is the Unicode Cased property: Lowercase, Uppercase or Lt.
func isCased(r rune) bool {
	return unicode.In(r, unicode.Lu, unicode.Ll, unicode.Lt, unicode.Other_Lowercase, unicode.Other_Uppercase)
}

// isCaseIgnorable is the Unicode Case_Ignorable property: Mn, Me, Cf, Lm,
// Sk, or Word_Break MidLetter, MidNumLet or Single_Quote (listed here: Go's
// unicode package has no Word_Break table).
func isCaseIgnorable(r rune) bool {
	switch r {
	case '\'', '.', ':', 0xb7, 0x387, 0x55f, 0x5f4, 0x2018, 0x2019, 0x2024, 0x2027,
		0xfe13, 0xfe52, 0xfe55, 0xff07, 0xff0e, 0xff1a:
		return true
	}
	return unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf, unicode.Lm, unicode.Sk)
}
