package sidecar

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// authenticator maps bearer tokens to tenants in constant time.
//
// Tokens are compared as SHA-256 digests: subtle.ConstantTimeCompare is
// constant-time only for inputs of equal length, and digests hide the
// configured tokens' lengths too. Every configured token is compared on every
// request, and the match is selected with ConstantTimeSelect rather than a
// branch, so timing does not say which entry matched or how far the scan got.
type authenticator struct {
	digests [][sha256.Size]byte
	tenants []string
}

func newAuthenticator(creds []Credential) *authenticator {
	a := &authenticator{}
	for _, c := range creds {
		a.digests = append(a.digests, sha256.Sum256([]byte(c.Token)))
		a.tenants = append(a.tenants, c.Tenant)
	}
	return a
}

// tenant returns the tenant of the request's bearer token, or "" when the
// header is missing, malformed or names no configured token.
func (a *authenticator) tenant(r *http.Request) string {
	token, ok := bearer(r.Header.Get("Authorization"))
	if !ok {
		return ""
	}
	d := sha256.Sum256([]byte(token))
	match := -1
	for i := range a.digests {
		eq := subtle.ConstantTimeCompare(d[:], a.digests[i][:])
		match = subtle.ConstantTimeSelect(eq, i, match)
	}
	if match < 0 {
		return ""
	}
	return a.tenants[match]
}

// bearer extracts the token of an RFC 6750 "Bearer" credential; the scheme
// is case-insensitive.
func bearer(h string) (string, bool) {
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}
