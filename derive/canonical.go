package derive

import "strconv"

// appendCanonical writes {"a":action,"p":{...},"t":tenant,"v":version}.
// Top-level keys are already in code-point order; payload values are sorted.
func appendCanonical(b []byte, action, tenant string, version int, p Payload) []byte {
	b = append(b, `{"a":`...)
	b = appendString(b, action)
	b = append(b, `,"p":{`...)
	for i, v := range p {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, v.Name)
		b = append(b, ':')
		b = appendString(b, v.Value)
	}
	b = append(b, `},"t":`...)
	b = appendString(b, tenant)
	b = append(b, `,"v":`...)
	b = strconv.AppendInt(b, int64(version), 10)
	return append(b, '}')
}

const hexDigits = "0123456789abcdef"

// appendString quotes s the way the reference (Python's json.dumps with
// ensure_ascii=False) does: only ", \ and control characters are escaped,
// the usual two-character escapes where they exist and \u00xx otherwise.
// Notably U+2028/U+2029 and <, >, & are written as themselves, unlike Go's
// encoding/json. Callers guarantee valid UTF-8.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"':
			b = append(b, '\\', '"')
		case '\\':
			b = append(b, '\\', '\\')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
