package sidecar

import (
	"net/http"
	"strings"

	"github.com/retrysafe/retrysafe/server/internal/edge"
)

// authenticator maps a request's bearer token to its tenant, in constant
// time (edge.Authenticator, which the MCP server uses too).
type authenticator struct{ edge.Authenticator }

func newAuthenticator(creds []Credential) *authenticator {
	a := &authenticator{}
	for _, c := range creds {
		a.Add(c.Tenant, c.Token)
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
	tenant, _ := a.Tenant(token)
	return tenant
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
