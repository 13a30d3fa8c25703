package apipix

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/retrysafe/retrysafe/tools"
)

// Config configures both tools' connection to one PSP.
type Config struct {
	// BaseURL of the PSP's API Pix, the server the specification's paths
	// hang from, e.g. "https://pix.example.com/api" (the spec's example),
	// "https://pix.api.efipay.com.br/v2" or "https://cdpj.partners.bancointer.com.br/pix/v2".
	// Required; nothing is hard-wired.
	BaseURL string
	// TokenURL is the OAuth2 token endpoint. Default: BaseURL's scheme and
	// host + "/oauth/token" (the spec's example tokenUrl).
	TokenURL string
	// ClientID and ClientSecret are the OAuth2 client credentials the PSP
	// issued (client-credentials grant, sent by HTTP Basic). Required.
	ClientID, ClientSecret string
	// Scopes requested with each token (PSPs that require them:
	// "cob.write cob.read pix.write pix.read"). Default none.
	Scopes []string
	// CertFile and KeyFile are the PEM client certificate and key for
	// mutual TLS, which API Pix requires; CAFile optionally replaces the
	// system roots to verify the PSP. Ignored when Client is set. The
	// certificate and key are read again for each new connection, so a
	// renewed pair written over the files needs no restart. A connection
	// opened while only one of the two is new fails its handshake, a
	// transient failure the executor retries; one PEM file holding both,
	// named as both, is replaced in one rename. A certificate outside its
	// validity is refused here, with its file and date, before any PSP.
	CertFile, KeyFile, CAFile string
	// Chave is the receiver's Pix key (DICT) the charges are paid to.
	// Required for pix.cob.
	Chave string
	// Expiracao is calendario.expiracao in seconds. Default 86400 (the
	// specification's default).
	Expiracao int
	// Client overrides the HTTP client (tests; a client with its own mTLS
	// set-up). It should have no timeout of its own: the executor's
	// context bounds each call.
	Client *http.Client
	// Description overrides the description shown to the model.
	Description string
}

// DefaultExpiracao is the default charge lifetime in seconds.
const DefaultExpiracao = 86400

// maxBody bounds what is read from the PSP: a response is stored.
const maxBody = 1 << 20

// client is what both tools share: the HTTP client with the mTLS
// certificate, and the cached OAuth2 token.
type client struct {
	base   string
	http   *http.Client
	cc     *clientcredentials.Config
	tokCtx context.Context

	mu  sync.Mutex
	tok *oauth2.Token
}

func newClient(cfg Config) (*client, error) {
	if cfg.BaseURL == "" {
		return nil, errors.New("apipix: BaseURL is required")
	}
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("apipix: BaseURL %q is not an http(s) URL", cfg.BaseURL)
	}
	if cfg.ClientID == "" || cfg.ClientSecret == "" {
		return nil, errors.New("apipix: ClientID and ClientSecret are required")
	}
	tokenURL := cfg.TokenURL
	if tokenURL == "" {
		tokenURL = u.Scheme + "://" + u.Host + "/oauth/token"
	} else if t, err := url.Parse(tokenURL); err != nil || (t.Scheme != "http" && t.Scheme != "https") || t.Host == "" {
		return nil, fmt.Errorf("apipix: TokenURL %q is not an http(s) URL", tokenURL)
	}
	hc := cfg.Client
	if hc == nil {
		if hc, err = mtlsClient(cfg.CertFile, cfg.KeyFile, cfg.CAFile); err != nil {
			return nil, err
		}
	}
	return &client{
		base: strings.TrimRight(cfg.BaseURL, "/"),
		http: hc,
		cc: &clientcredentials.Config{
			ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret, TokenURL: tokenURL, Scopes: cfg.Scopes,
			AuthStyle: oauth2.AuthStyleInHeader,
		},
		// The token endpoint is reached through the same client: PSPs
		// require the mTLS certificate there too.
		tokCtx: context.WithValue(context.Background(), oauth2.HTTPClient, hc),
	}, nil
}

// mtlsClient builds a client presenting the PEM certificate.
func mtlsClient(certFile, keyFile, caFile string) (*http.Client, error) {
	// Every call past net/http's two idle connections per host would
	// otherwise pay a new mutual TLS handshake with the PSP.
	tr := tools.NewTransport()
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	switch {
	case certFile != "" && keyFile != "":
		load := func() (*tls.Certificate, error) {
			cert, err := tls.LoadX509KeyPair(certFile, keyFile)
			if err != nil {
				// The path is configuration, not a secret; the error may
				// quote neither the key nor its bytes.
				return nil, fmt.Errorf("apipix: client certificate %s / key %s: %w", certFile, keyFile, errors.Unwrap(err))
			}
			// A PSP refuses a certificate outside its validity with a bare
			// alert; said here, the operator reads which file and when.
			if err := checkValidity(cert.Leaf, time.Now()); err != nil {
				return nil, fmt.Errorf("apipix: client certificate %s: %w", certFile, err)
			}
			return &cert, nil
		}
		if _, err := load(); err != nil {
			return nil, err
		}
		// Read again for every handshake (a new connection to the PSP;
		// they are kept alive, so a few per minute at most): a renewed
		// certificate written over the files is presented from the next
		// connection on, without a restart. Files that cannot be read or
		// do not pair fail that handshake before anything is sent.
		tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			cert, err := load()
			if err != nil {
				// Paths, a date or the pairing's failure: configuration,
				// never the key, and stored with the action's failure.
				return nil, tools.Transient("tls_client_certificate", "could not load the client certificate: "+err.Error(), err)
			}
			return cert, nil
		}
	case certFile != "" || keyFile != "":
		return nil, errors.New("apipix: set both CertFile and KeyFile (PEM), or neither")
	}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("apipix: CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("apipix: CA file %s holds no PEM certificate", caFile)
		}
		tc.RootCAs = pool
	}
	tr.TLSClientConfig = tc
	return &http.Client{Transport: tr}, nil
}

// checkValidity says whether leaf (nil when the pair was parsed without
// it) is valid at now.
func checkValidity(leaf *x509.Certificate, now time.Time) error {
	switch {
	case leaf == nil:
		return nil
	case now.After(leaf.NotAfter):
		return fmt.Errorf("expired on %s", leaf.NotAfter.UTC().Format(time.RFC3339))
	case now.Before(leaf.NotBefore):
		return fmt.Errorf("not valid until %s", leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	return nil
}

// token returns the cached token, fetching one when there is none or it
// is about to expire.
func (c *client) token(ctx context.Context) (*oauth2.Token, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tok.Valid() { // Valid allows for clock skew (expiry minus 10s)
		return c.tok, nil
	}
	// The request's context bounds the fetch, with the mTLS client.
	tctx := context.WithValue(ctx, oauth2.HTTPClient, c.http)
	tok, err := c.cc.Token(tctx)
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && re.Response != nil {
			// Nothing reached the API: safe to try again, but an operator
			// must fix refused credentials (review after MaxAttempts).
			return nil, &tools.Error{Class: tools.ClassTransient, Code: "oauth_token", Status: re.Response.StatusCode,
				Message: "the token endpoint refused the client credentials", Err: err}
		}
		ce := tools.Classify(err)
		// The token request never acts on a charge, whatever became of it.
		return nil, &tools.Error{Class: tools.ClassTransient, Code: "oauth_" + ce.Code, Message: "could not get an access token", Err: err}
	}
	c.tok = tok
	return tok, nil
}

// invalidate drops tok from the cache (unless another call replaced it).
func (c *client) invalidate(tok *oauth2.Token) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tok == tok {
		c.tok = nil
	}
}

// response is one answer of the PSP.
type response struct {
	status int
	body   []byte
}

// do sends one request with a bearer token. A 401 (what PSPs answer to an
// expired token) or 403 AcessoNegado (the only authorization status the
// specification defines) refreshes the token and sends once more: the PSP
// refused without acting, so a second send is safe.
func (c *client) do(ctx context.Context, method, path string, body any) (*response, error) {
	var raw []byte
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, tools.Definitive("encode", "could not encode the request", err)
		}
		raw = b
	}
	for try := 0; ; try++ {
		tok, err := c.token(ctx)
		if err != nil {
			return nil, err
		}
		req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(raw))
		if err != nil {
			return nil, tools.Definitive("request", "could not build the request", err)
		}
		if body == nil {
			req.Body, req.ContentLength = nil, 0
		} else {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("Accept", "application/json")
		tok.SetAuthHeader(req)
		resp, err := c.http.Do(req)
		if err != nil {
			return nil, tools.Classify(err)
		}
		b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
		resp.Body.Close()
		if err != nil {
			// The status arrived, the body did not: only a read can tell.
			ce := tools.Classify(err)
			ce.Status = resp.StatusCode
			if ce.Class == tools.ClassTransient {
				ce.Class = tools.ClassUncertain
			}
			return nil, ce
		}
		if (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden) && try == 0 {
			c.invalidate(tok)
			continue
		}
		return &response{status: resp.StatusCode, body: b}, nil
	}
}

// Problem is an API Pix error (RFC 7807, problem+json).
type Problem struct {
	Type      string `json:"type"`
	Title     string `json:"title"`
	Status    int    `json:"status"`
	Violacoes []struct {
		Razao       string `json:"razao"`
		Propriedade string `json:"propriedade"`
	} `json:"violacoes"`
}

// ErrorTypePrefix is the prefix of the specification's error types.
const ErrorTypePrefix = "https://pix.bcb.gov.br/api/v2/error/"

// Known error types (the last segment of type).
const (
	TypeCobOperacaoInvalida  = "CobOperacaoInvalida"
	TypePixDevolucaoInvalida = "PixDevolucaoInvalida"
	TypeAcessoNegado         = "AcessoNegado"
	TypeNaoEncontrado        = "NaoEncontrado"
	TypeServicoIndisponivel  = "ServicoIndisponivel"
)

// classify maps a non-2xx answer to a classified error. The code is the
// problem's type name ("CobOperacaoInvalida") when the body is
// problem+json, else http_<status>; the class follows the status
// (tools.StatusError): 400, 403, 404 are refusals that did nothing, 429
// is transient, 503 and other 5xx are uncertain (a PSP may fail after
// acting). The message is the problem's title and the violated
// properties' names, never their values (they may be a CPF).
func classify(r *response) error {
	e := tools.Classify(tools.StatusError(r.status))
	var p Problem
	if json.Unmarshal(r.body, &p) == nil && p.Type != "" {
		name := p.Type[strings.LastIndexByte(p.Type, '/')+1:]
		if name != "" && len(name) <= 64 {
			e.Code = name
		}
		msg := p.Title
		var props []string
		for _, v := range p.Violacoes {
			if v.Propriedade != "" && len(v.Propriedade) <= 64 {
				props = append(props, v.Propriedade)
			}
		}
		if len(props) > 0 {
			msg += " (" + strings.Join(props, ", ") + ")"
		}
		if len(msg) > 200 {
			msg = msg[:200]
		}
		e.Message = msg
	}
	return e
}
