package apipix

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strings"
	"time"
)

// token implements the client-credentials grant (RFC 6749 section 4.4).
func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	id, secret, ok := r.BasicAuth()
	if err := r.ParseForm(); err != nil || r.PostForm.Get("grant_type") != "client_credentials" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "unsupported_grant_type"})
		return
	}
	if !ok {
		// RFC 6749 allows the credentials in the body too.
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	if subtle.ConstantTimeCompare([]byte(id), []byte(s.cfg.ClientID)) != 1 ||
		subtle.ConstantTimeCompare([]byte(secret), []byte(s.cfg.ClientSecret)) != 1 {
		s.mu.Lock()
		s.stats.TokensRefused++
		s.mu.Unlock()
		w.Header().Set("WWW-Authenticate", `Basic realm="oauth"`)
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_client"})
		return
	}
	var b [24]byte
	rand.Read(b[:]) //nolint:errcheck // crypto/rand does not fail
	tok := hex.EncodeToString(b[:])
	s.mu.Lock()
	s.tokens[tok] = s.now().Add(s.cfg.TokenTTL)
	s.stats.TokensIssued++
	s.mu.Unlock()
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, map[string]any{
		"access_token": tok, "token_type": "Bearer", "expires_in": int(s.cfg.TokenTTL / time.Second),
		"scope": "cob.write cob.read pix.write pix.read webhook.write webhook.read",
	})
}

// ExpireTokens makes every issued token invalid, as a PSP rotating its
// keys would: the next call with one is refused.
func (s *Server) ExpireTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.tokens)
}

func (s *Server) auth(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		s.mu.Lock()
		exp, known := s.tokens[tok]
		valid := ok && known && s.now().Before(exp)
		if !valid {
			s.stats.AuthRefused++
		}
		s.mu.Unlock()
		if !valid {
			writeProblem(w, http.StatusForbidden, "AcessoNegado", "Acesso Negado",
				"Requisição de participante autenticado que viola alguma regra de autorização.")
			return
		}
		next(w, r)
	})
}
