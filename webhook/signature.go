package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// maxSignatures bounds the v1 entries of one header (a provider rotating
// its secret sends two); more is not a provider.
const maxSignatures = 8

// Sign returns the signature header value a provider sends for body at t:
// "t=<unix>,v1=<hex HMAC-SHA256(secret, "<unix>.<body>")>" (the sandbox
// PSP's scheme, which is Stripe's). For tests and senders.
func Sign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(signatureMAC(secret, ts, body))
}

func signatureMAC(secret, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// Verify checks a signature header against the raw body: one of its v1
// entries must be the HMAC of "<t>.<body>" (compared in constant time), and
// t must be within tolerance of now, either way. The MAC is checked before
// the time, so an unsigned request learns nothing about the clock. It
// returns nil, ErrSignature or ErrSignatureExpired.
func Verify(secret, header string, body []byte, tolerance time.Duration, now time.Time) error {
	var (
		ts   string
		sigs [][]byte
	)
	for part := range strings.SplitSeq(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			if ts != "" {
				return fmt.Errorf("%w: two timestamps", ErrSignature)
			}
			ts = v
		case "v1":
			b, err := hex.DecodeString(v)
			if err != nil || len(b) != sha256.Size {
				continue // another scheme's value may share the name in a future version
			}
			if len(sigs) == maxSignatures {
				return fmt.Errorf("%w: too many signatures", ErrSignature)
			}
			sigs = append(sigs, b)
		}
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || unix <= 0 || len(sigs) == 0 {
		return fmt.Errorf("%w: missing or malformed header", ErrSignature)
	}
	want := signatureMAC(secret, ts, body)
	ok := false
	for _, s := range sigs {
		// No early exit: the time taken does not depend on which entry matched.
		ok = hmac.Equal(s, want) || ok
	}
	if !ok {
		return ErrSignature
	}
	if d := now.Sub(time.Unix(unix, 0)); d > tolerance || d < -tolerance {
		return ErrSignatureExpired
	}
	return nil
}
