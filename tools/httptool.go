package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// HTTPConfig configures a built-in HTTP tool.
type HTTPConfig struct {
	// BaseURL of the provider API, e.g. "https://psp.example.com". Required.
	BaseURL string
	// Token is sent as "Authorization: Bearer <token>" when not empty.
	Token string
	// Path of the create endpoint; each tool has a default.
	Path string
	// LookupPath of the lookup endpoint (GET ...?idempotency_key=K); each
	// tool has a default. "-" disables Lookup.
	LookupPath string
	// Client defaults to NewClient(): keep-alive with room for concurrent
	// calls and no timeout of its own, the executor's context bounding each
	// call (shorter than the lease).
	Client *http.Client
	// Description overrides the description shown to the model.
	Description string
}

// maxBody bounds what is read from a provider: a response is stored.
const maxBody = 1 << 20

type httpTool struct {
	base, path, lookupPath, token string
	client                        *http.Client
}

func newHTTPTool(cfg HTTPConfig, defPath, defLookup string) (*httpTool, error) {
	if cfg.BaseURL == "" {
		return nil, errors.New("tools: BaseURL is required")
	}
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("tools: BaseURL %q is not an http(s) URL", cfg.BaseURL)
	}
	h := &httpTool{
		base:       strings.TrimRight(cfg.BaseURL, "/"),
		path:       cfg.Path,
		lookupPath: cfg.LookupPath,
		token:      cfg.Token,
		client:     cfg.Client,
	}
	if h.path == "" {
		h.path = defPath
	}
	switch h.lookupPath {
	case "":
		h.lookupPath = defLookup
	case "-":
		h.lookupPath = ""
	}
	if h.client == nil {
		h.client = NewClient()
	}
	return h, nil
}

func (h *httpTool) canLookup() bool { return h.lookupPath != "" }

// post sends body with the key and maps the outcome to a failure class.
func (h *httpTool) post(ctx context.Context, key string, body any) (json.RawMessage, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, Definitive("encode", "could not encode the request", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.base+h.path, bytes.NewReader(b))
	if err != nil {
		return nil, Definitive("request", "could not build the request", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	return h.do(req, key)
}

func (h *httpTool) lookup(ctx context.Context, key string) (json.RawMessage, error) {
	if h.lookupPath == "" {
		return nil, ErrLookupUnsupported
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.base+h.lookupPath+"?idempotency_key="+url.QueryEscape(key), nil)
	if err != nil {
		return nil, Definitive("request", "could not build the request", err)
	}
	out, err := h.do(req, key)
	var te *Error
	if errors.As(err, &te) && te.Status == http.StatusNotFound {
		return nil, fmt.Errorf("%w (%s)", ErrNotFound, te.Code)
	}
	return out, err
}

func (h *httpTool) do(req *http.Request, key string) (json.RawMessage, error) {
	req.Header.Set("Accept", "application/json")
	if h.token != "" {
		req.Header.Set("Authorization", "Bearer "+h.token)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return nil, Classify(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		// The status arrived but the body did not: the provider acted (2xx)
		// or may have; only the key can tell.
		ce := Classify(err)
		ce.Status = resp.StatusCode
		if ce.Class == ClassTransient {
			ce.Class = ClassUncertain
		}
		return nil, ce
	}
	if err := StatusError(resp.StatusCode); err != nil {
		return nil, err
	}
	if !json.Valid(body) {
		return nil, Uncertain("bad_response", fmt.Sprintf("HTTP %d with a body that is not JSON", resp.StatusCode), nil)
	}
	// A provider that answers for another key answered another request.
	var echo struct {
		Key string `json:"idempotency_key"`
	}
	if json.Unmarshal(body, &echo) == nil && echo.Key != "" && echo.Key != key {
		return nil, Uncertain("key_mismatch", "provider answered with another idempotency key", nil)
	}
	return body, nil
}

// StatusError maps a provider's HTTP status to a classified error (nil for
// 2xx). 400, 401, 403, 404, 422 and other 4xx are definitive: the request was
// refused as it stands. 429 is transient: refused before acting. 408, 409
// (the key is in flight at the provider), 425 and 5xx are uncertain: the
// provider may yet act, so only the same key may follow. Anything else (1xx,
// 3xx) is uncertain too.
func StatusError(status int) error {
	code := fmt.Sprintf("http_%d", status)
	switch {
	case status >= 200 && status < 300:
		return nil
	case status == http.StatusTooManyRequests:
		// Rate limited before anything was done: safe to retry.
		return &Error{Class: ClassTransient, Code: code, Status: status, Message: http.StatusText(status)}
	case status == http.StatusRequestTimeout, status == http.StatusConflict, status == http.StatusTooEarly:
		return &Error{Class: ClassUncertain, Code: code, Status: status, Message: http.StatusText(status)}
	case status >= 400 && status < 500:
		return &Error{Class: ClassDefinitive, Code: code, Status: status, Message: http.StatusText(status)}
	default:
		return &Error{Class: ClassUncertain, Code: code, Status: status, Message: http.StatusText(status)}
	}
}
