package sidecar

import (
	"net/http"
	"testing"
	"time"
)

func TestAuthenticatorTenant(t *testing.T) {
	t.Parallel()
	a := newAuthenticator([]Credential{
		{Tenant: "tenant-a", Token: "alpha"},
		{Tenant: "tenant-b", Token: "alphabet"}, // shares a prefix with alpha
		{Tenant: "tenant-a", Token: "alpha-rotated"},
	})
	for header, want := range map[string]string{
		"Bearer alpha":         "tenant-a",
		"Bearer alphabet":      "tenant-b",
		"Bearer alpha-rotated": "tenant-a",
		"bearer   alphabet  ":  "tenant-b",
		"Bearer alph":          "",
		"Bearer alphabets":     "",
		"Bearer ":              "",
		"Bearer":               "",
		"alpha":                "",
		"Basic alpha":          "",
		"":                     "",
	} {
		r, _ := http.NewRequest(http.MethodGet, "/", nil)
		if header != "" {
			r.Header.Set("Authorization", header)
		}
		if got := a.tenant(r); got != want {
			t.Errorf("%q: tenant %q, want %q", header, got, want)
		}
	}
}

func TestValidateCredentials(t *testing.T) {
	t.Parallel()
	for name, creds := range map[string][]Credential{
		"none":         nil,
		"empty tenant": {{Tenant: "", Token: "x"}},
		"empty token":  {{Tenant: "a", Token: ""}},
		"shared token": {{Tenant: "a", Token: "x"}, {Tenant: "b", Token: "x"}},
		"space tenant": {{Tenant: "a b", Token: "x"}},
		"space token":  {{Tenant: "a", Token: "x y"}},
	} {
		if err := ValidateCredentials(creds); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := ValidateCredentials([]Credential{{Tenant: "a", Token: "x"}, {Tenant: "a", Token: "y"}}); err != nil {
		t.Errorf("two tokens for one tenant (rotation): %v", err)
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		d, min float64
		want   int
	}{{0, 1, 1}, {0.2, 1, 1}, {1.2, 1, 2}, {29.9, 1, 30}, {3, 0, 3}} {
		if got := retryAfterSeconds(dur(tc.d), dur(tc.min)); got != tc.want {
			t.Errorf("retryAfterSeconds(%v, %v) = %d, want %d", tc.d, tc.min, got, tc.want)
		}
	}
}

func dur(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
