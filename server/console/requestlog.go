package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"
)

// ErrNotRecorded is what a RequestLog returns for an action whose
// provider keeps no log it can read.
var ErrNotRecorded = errors.New("console: the provider's requests are not recorded")

// HTTPRequestLog reads a provider's request log served over HTTP in the
// sandbox PSP's shape (GET /_sandbox/requests):
//
//	{"data":[{"at":"...","method":"POST","path":"/v1/pix/charges","idempotency_key":"...","status":500}]}
//
// where status 0 is a request dropped without an answer.
type HTTPRequestLog struct {
	// URL of the log, e.g. http://127.0.0.1:8081/_sandbox/requests.
	URL string
	// Actions whose provider this is. Default: pix.charge.
	Actions []string
	// Client defaults to one with a 5s timeout.
	Client *http.Client
}

// Requests implements RequestLog.
func (l *HTTPRequestLog) Requests(ctx context.Context, action, key string) ([]ProviderRequest, error) {
	actions := l.Actions
	if actions == nil {
		actions = []string{"pix.charge"}
	}
	if !slices.Contains(actions, action) {
		return nil, ErrNotRecorded
	}
	c := l.Client
	if c == nil {
		c = &http.Client{Timeout: 5 * time.Second}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, l.URL, nil)
	if err != nil {
		return nil, err
	}
	res, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("console: request log: HTTP %d", res.StatusCode)
	}
	var body struct {
		Data []struct {
			ProviderRequest
			Key string `json:"idempotency_key"`
		} `json:"data"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(nil, res.Body, 16<<20)).Decode(&body); err != nil {
		return nil, fmt.Errorf("console: request log: %w", err)
	}
	var out []ProviderRequest
	for _, r := range body.Data {
		if r.Key == key {
			out = append(out, r.ProviderRequest)
		}
	}
	return out, nil
}
