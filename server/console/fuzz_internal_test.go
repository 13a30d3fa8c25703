package console

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// safeNext turns whatever a form or a query says into a redirect that
// stays inside the console.
func FuzzSafeNext(f *testing.F) {
	for _, s := range []string{"/console/", "/console/intent?tenant=a&key=b", "//evil.example/console/", "https://evil.example/",
		"/console/\\evil", "/console/\r\nSet-Cookie: x", "/consolex", "", "/console/../v1/tools", "javascript:alert(1)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := safeNext(s)
		if !strings.HasPrefix(got, Prefix+"/") || strings.HasPrefix(got, "//") || strings.ContainsAny(got, "\\\r\n") {
			t.Fatalf("safeNext(%q) = %q", s, got)
		}
		if got != s && got != Prefix+"/" {
			t.Fatalf("safeNext(%q) = %q: neither the input nor the console's root", s, got)
		}
	})
}

// mask never gives back more than the last two characters of a value.
func FuzzMask(f *testing.F) {
	for _, s := range []string{"", "a", "52998224725", "maria@example.com", "+5511999999999", "çãé", "123e4567-e89b-12d3-a456-426614174000"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return
		}
		m := mask(s)
		r := []rune(s)
		want := strings.Repeat("•", max(len(r), 3))
		if len(r) > 6 {
			want = strings.Repeat("•", min(len(r)-2, 10)) + string(r[len(r)-2:])
		}
		if m != want {
			t.Fatalf("mask(%q) = %q, want %q", s, m, want)
		}
	})
}
