package apipix

import (
	"errors"
	"regexp"
	"strings"
	"testing"
)

var txidPattern = regexp.MustCompile(`^[a-zA-Z0-9]{26,35}$`)

// FuzzCents: an amount read from the PSP is non-negative, and every
// amount the tools write reads back to itself.
func FuzzCents(f *testing.F) {
	for _, s := range []string{"180.00", "0.01", "9999999999.99", "1.5", "-1.00", "1e2.00", ".00", "00001.00", "12345678901.00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, ok := parseCents(s)
		if !ok {
			return
		}
		if c < 0 {
			t.Fatalf("%q read as %d", s, c)
		}
		if c == 0 {
			return
		}
		w, err := FormatCents(c)
		if err != nil {
			t.Fatalf("%q: %d cannot be written: %v", s, c, err)
		}
		if back, ok := parseCents(w); !ok || back != c {
			t.Fatalf("%d written %q reads %d", c, w, back)
		}
	})
}

// FuzzTxID: a key gives a txid the specification accepts, its prefix, or
// ErrBadKey.
func FuzzTxID(f *testing.F) {
	for _, s := range []string{strings.Repeat("0123456789abcdef", 4), strings.Repeat("A", 64), "", "abc"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		txid, err := TxID(key)
		if err != nil {
			if !errors.Is(err, ErrBadKey) {
				t.Fatal(err)
			}
			return
		}
		if !txidPattern.MatchString(txid) || !strings.HasPrefix(key, txid) {
			t.Fatalf("key %q gave txid %q", key, txid)
		}
	})
}
