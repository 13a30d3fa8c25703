package psp

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/retrysafe/retrysafe/internal/backoff"
)

// EventChargeSucceeded is the type of the event sent after each charge,
// named after Stripe's.
const EventChargeSucceeded = "payment_intent.succeeded"

// SignatureHeader carries the webhook signature.
const SignatureHeader = "Retrysafe-Signature"

// Event is a webhook event.
type Event struct {
	ID      string    `json:"id"`
	Object  string    `json:"object"` // "event"
	Type    string    `json:"type"`
	Created int64     `json:"created"`
	Data    EventData `json:"data"`
}

// EventData holds the event's object.
type EventData struct {
	Object Charge `json:"object"`
}

// Sign computes the signature header for body sent at t, Stripe style:
// "t=<unix>,v1=<hex HMAC-SHA256(secret, "<unix>.<body>")>". Binding the
// timestamp into the MAC lets a receiver refuse replays of old deliveries.
func Sign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
}

func mac(secret, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// Signature errors.
var (
	ErrSignatureInvalid = errors.New("psp: webhook signature invalid")
	ErrSignatureStale   = errors.New("psp: webhook signature timestamp outside tolerance")
)

// VerifySignature checks a Retrysafe-Signature header against body: one of
// its v1 entries must be the HMAC of "<t>.<body>", and t must be within
// tolerance of now.
func VerifySignature(secret, header string, body []byte, tolerance time.Duration, now time.Time) error {
	var ts string
	var sigs [][]byte
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			if b, err := hex.DecodeString(v); err == nil {
				sigs = append(sigs, b)
			}
		}
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return fmt.Errorf("%w: malformed header", ErrSignatureInvalid)
	}
	want := mac(secret, ts, body)
	ok := false
	for _, s := range sigs {
		ok = ok || hmac.Equal(s, want)
	}
	if !ok {
		return ErrSignatureInvalid
	}
	if d := now.Sub(time.Unix(unix, 0)); d > tolerance || d < -tolerance {
		return ErrSignatureStale
	}
	return nil
}

func (s *Server) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

func (s *Server) runWebhooks(ctx context.Context) {
	if s.cfg.WebhookURL == "" {
		<-ctx.Done()
		return
	}
	t := time.NewTicker(s.cfg.WebhookPoll)
	defer t.Stop()
	for {
		for {
			n, err := s.DeliverDue(ctx)
			if err != nil && ctx.Err() == nil {
				s.cfg.Logger.Warn("psp: webhook delivery pass failed", "err", err)
			}
			if n < s.cfg.WebhookBatch || err != nil {
				break
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.kick:
		}
	}
}

// DeliverDue sends one batch of due webhook deliveries and returns how many
// it attempted. Each is claimed (and committed) before its HTTP call, so no
// transaction is held across the network and concurrent loops in several
// processes never send one attempt twice.
func (s *Server) DeliverDue(ctx context.Context) (int, error) {
	// The claim outlives one attempt's timeout: a process killed mid-send
	// makes the delivery due again soon after.
	claimFor := s.cfg.WebhookTimeout + 5*time.Second
	due, err := DeliveryClaim(ctx, s.pool, s.cfg.WebhookBatch, claimFor)
	if err != nil {
		return 0, err
	}
	for _, d := range due {
		status, sendErr := s.send(ctx, d)
		// The outcome is recorded even if ctx ended during the call.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		if sendErr == nil {
			err = DeliveryDone(rctx, s.pool, d, status)
		} else {
			backoff := s.backoff(int(d.Attempt))
			if int(d.Attempt) >= s.cfg.WebhookMaxAttempts {
				s.cfg.Logger.Warn("psp: webhook abandoned", "event", d.EventID, "attempts", d.Attempt, "err", sendErr)
			}
			err = DeliveryRetry(rctx, s.pool, d, status, sendErr.Error(), backoff, s.cfg.WebhookMaxAttempts)
		}
		cancel()
		if err != nil {
			return len(due), err
		}
	}
	return len(due), nil
}

// send makes one delivery attempt; any non-2xx answer is a failure.
func (s *Server) send(ctx context.Context, d Delivery) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.URL, bytes.NewReader(d.Payload))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "retrysafe-sandbox-psp")
	req.Header.Set(SignatureHeader, Sign(s.cfg.WebhookSecret, time.Now(), d.Payload))
	resp, err := s.cfg.HTTPClient.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) //nolint:errcheck // drain to reuse the connection
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, fmt.Errorf("webhook answered %d", resp.StatusCode)
	}
	return resp.StatusCode, nil
}

// backoff after the attempt-th failure: WebhookBackoff doubled per attempt,
// capped, with ±20% jitter so that a receiver coming back up is not hit by
// every pending event at once.
func (s *Server) backoff(attempt int) time.Duration {
	return backoff.Spread(backoff.Exponential(s.cfg.WebhookBackoff, s.cfg.WebhookMaxBackoff, attempt), 0.2)
}
