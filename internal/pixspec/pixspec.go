// Package pixspec validates HTTP traffic against the Central Bank of
// Brazil's API Pix specification (OpenAPI 3.0, release 2.9.0, Apache-2.0),
// with a real OpenAPI validator (github.com/getkin/kin-openapi's
// openapi3filter), for the tests of tools/apipix, sandbox/apipix and the Pix
// webhook.
//
// The specification is read from testdata/bcb-pix-api/openapi-2.9.0.yaml at
// the module root (found by walking up to go.mod), a copy of the published
// file. That file writes some patterns as JavaScript regex literals, for
// example the CPF's "/^\\d{11}$/", which as JSON Schema patterns match
// nothing (no CPF starts with a slash). Load rewrites exactly those, the
// pattern between the slashes, and reports how many it rewrote so a test can
// pin the count: a new release with more of them, or none, fails loudly
// instead of validating differently.
//
// Requests are routed under the server "/api" (the spec's example servers
// serve the API there); the OAuth2 token endpoint is not an API Pix path
// and is not validated. Security requirements are checked for a bearer
// token only: scopes are the PSP's business.
//
// It is for tests only: nothing but _test.go files import it, so
// kin-openapi stays out of the binary.
package pixspec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// File is the spec's path relative to the module root.
const File = "testdata/bcb-pix-api/openapi-2.9.0.yaml"

// APIBase is the path prefix the API is served under.
const APIBase = "/api"

// jsRegexPattern matches a YAML pattern written as a JavaScript regex
// literal: pattern: "/^...$/".
var jsRegexPattern = regexp.MustCompile(`pattern: "/(\^[^"]*\$)/"`)

// Spec is a loaded, normalized specification and its router.
type Spec struct {
	Doc    *openapi3.T
	router routers.Router
	// Normalized is how many JavaScript-literal patterns Load rewrote.
	Normalized int
}

var (
	once    sync.Once
	shared  *Spec
	loadErr error
)

// Load reads and normalizes the specification once per process.
func Load() (*Spec, error) {
	once.Do(func() { shared, loadErr = load() })
	return shared, loadErr
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("pixspec: no go.mod above the working directory")
		}
		dir = parent
	}
}

func load() (*Spec, error) {
	raw, err := ReadFile()
	if err != nil {
		return nil, err
	}
	return Parse(raw)
}

// ReadFile reads the published specification's bytes.
func ReadFile() ([]byte, error) {
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	return os.ReadFile(filepath.Join(root, File))
}

// Parse normalizes and loads a specification's bytes.
func Parse(raw []byte) (*Spec, error) {
	n := len(jsRegexPattern.FindAllIndex(raw, -1))
	s, err := ParseVerbatim(jsRegexPattern.ReplaceAll(raw, []byte(`pattern: "$1"`)))
	if err != nil {
		return nil, err
	}
	s.Normalized = n
	return s, nil
}

// ParseVerbatim loads a specification's bytes without normalizing its
// patterns: with the published file, a valid CPF does not validate. It
// exists to show that.
func ParseVerbatim(raw []byte) (*Spec, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(raw)
	if err != nil {
		return nil, fmt.Errorf("pixspec: load: %w", err)
	}
	// The payload locations (tag CobPayload: "/{pixUrlAccessToken}",
	// "/cobv/{pixUrlAccessToken}", ...) are served to payers' apps from
	// another host, declared per operation; their templates collide with
	// the API's ("/cobv/{txid}"). They are not the API a receiver calls:
	// drop them.
	for path, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			if op.Servers != nil && len(*op.Servers) > 0 {
				doc.Paths.Delete(path)
				break
			}
		}
	}
	// The published examples are not all valid against their own schemas
	// (integers written as strings): validate the document's structure,
	// not its examples.
	if err := doc.Validate(context.Background(), openapi3.DisableExamplesValidation(),
		openapi3.DisableSchemaDefaultsValidation()); err != nil {
		return nil, fmt.Errorf("pixspec: the document does not validate: %w", err)
	}
	doc.Servers = openapi3.Servers{{URL: APIBase}}
	r, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("pixspec: router: %w", err)
	}
	return &Spec{Doc: doc, router: r}, nil
}

func options() *openapi3filter.Options {
	return &openapi3filter.Options{
		IncludeResponseStatus: true,
		MultiError:            true,
		AuthenticationFunc: func(_ context.Context, in *openapi3filter.AuthenticationInput) error {
			if !strings.HasPrefix(in.RequestValidationInput.Request.Header.Get("Authorization"), "Bearer ") {
				return errors.New("no bearer token")
			}
			return nil
		},
	}
}

// input routes req (whose body is body) to its operation.
func (s *Spec) input(req *http.Request, body []byte) (*openapi3filter.RequestValidationInput, error) {
	r := req.Clone(req.Context())
	// Match on the path alone: the test servers' hosts are not the spec's.
	r.URL.Scheme, r.URL.Host, r.Host = "", "", ""
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	r.GetBody = nil
	route, params, err := s.router.FindRoute(r)
	if err != nil {
		return nil, fmt.Errorf("pixspec: %s %s: %w", req.Method, req.URL.Path, err)
	}
	return &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route, Options: options()}, nil
}

// ValidateRequest checks a request (method, path, parameters, security,
// body) against its operation.
func (s *Spec) ValidateRequest(req *http.Request, body []byte) error {
	in, err := s.input(req, body)
	if err != nil {
		return err
	}
	if err := openapi3filter.ValidateRequest(req.Context(), in); err != nil {
		return fmt.Errorf("pixspec: request %s %s: %w", req.Method, req.URL.Path, err)
	}
	return nil
}

// ValidateResponse checks a response (status among those the operation
// defines, content type, body) against the operation of its request.
func (s *Spec) ValidateResponse(req *http.Request, reqBody []byte, status int, header http.Header, body []byte) error {
	in, err := s.input(req, reqBody)
	if err != nil {
		return err
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: status, Header: header, Options: options(),
	}
	out.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(req.Context(), out); err != nil {
		return fmt.Errorf("pixspec: response %d to %s %s: %w", status, req.Method, req.URL.Path, err)
	}
	return nil
}

// ValidateCallback checks the body of the Pix webhook callback (PUT
// /webhook/{chave}'s callback listaPix, POST {webhookUrl}/pix).
func (s *Spec) ValidateCallback(body []byte) error {
	op := s.Doc.Paths.Value("/webhook/{chave}").Put
	cb := op.Callbacks["listaPix"].Value.Value("{$request.body#/webhookUrl}/pix").Post
	req, err := http.NewRequest(http.MethodPost, "/pix", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	in := &openapi3filter.RequestValidationInput{Request: req, Options: options()}
	if err := openapi3filter.ValidateRequestBody(req.Context(), in, cb.RequestBody.Value); err != nil {
		return fmt.Errorf("pixspec: callback body: %w", err)
	}
	return nil
}

// Failure is one request/response exchange that did not validate.
type Failure struct {
	Method, Path string
	Err          error
}

// Transport validates every API Pix request it carries and every response
// it brings back, recording failures; the token endpoint passes through.
// Safe for concurrent use.
type Transport struct {
	Spec *Spec
	Base http.RoundTripper // default http.DefaultTransport
	// TokenPath is not validated (default "/oauth/token").
	TokenPath string

	mu        sync.Mutex
	failures  []Failure
	validated int
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	tokenPath := t.TokenPath
	if tokenPath == "" {
		tokenPath = "/oauth/token"
	}
	if req.URL.Path == tokenPath {
		return base.RoundTrip(req)
	}
	var reqBody []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		reqBody = b
		req.Body = io.NopCloser(bytes.NewReader(b))
	}
	if err := t.Spec.ValidateRequest(req, reqBody); err != nil {
		t.fail(req, err)
	}
	resp, err := base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	body, rerr := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if rerr != nil {
		return resp, nil // a dropped answer: nothing to validate
	}
	if err := t.Spec.ValidateResponse(req, reqBody, resp.StatusCode, resp.Header, body); err != nil {
		t.fail(req, err)
	}
	t.mu.Lock()
	t.validated++
	t.mu.Unlock()
	return resp, nil
}

func (t *Transport) fail(req *http.Request, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.failures = append(t.failures, Failure{Method: req.Method, Path: req.URL.Path, Err: err})
}

// Failures returns what did not validate so far.
func (t *Transport) Failures() []Failure {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Failure(nil), t.failures...)
}

// Validated is how many exchanges were validated (requests and their
// responses).
func (t *Transport) Validated() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.validated
}
