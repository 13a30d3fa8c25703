package idempotency

import (
	"bytes"
	"maps"
	"net/http"
	"slices"
	"strconv"
)

// recorder buffers a handler's answer. Nothing reaches the client until the
// answer is stored (and, in transactional mode, committed): a client must
// never see an answer that a rollback could take back.
type recorder struct {
	header      http.Header
	status      int
	body        bytes.Buffer
	wroteHeader bool
}

func newRecorder() *recorder { return &recorder{header: http.Header{}} }

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.wroteHeader || status < 200 { // 1xx informational answers are not the answer
		return
	}
	r.status, r.wroteHeader = status, true
}

func (r *recorder) Write(p []byte) (int, error) {
	if !r.wroteHeader {
		r.WriteHeader(http.StatusOK)
	}
	return r.body.Write(p)
}

// finish fixes what net/http would otherwise decide while writing, so that
// the first answer and every replay carry the same status and type.
func (r *recorder) finish() {
	if !r.wroteHeader {
		r.WriteHeader(http.StatusOK)
	}
	if r.header.Get("Content-Type") == "" && r.body.Len() > 0 {
		r.header.Set("Content-Type", http.DetectContentType(r.body.Bytes()))
	}
}

// stored is the part of the answer that is kept for replays.
func (r *recorder) stored(keep map[string]bool) *response {
	h := http.Header{}
	for k, v := range r.header {
		if keep[http.CanonicalHeaderKey(k)] {
			h[http.CanonicalHeaderKey(k)] = append([]string(nil), v...)
		}
	}
	return &response{Status: r.status, Header: h, Body: r.body.Bytes()}
}

// writeTo sends the handler's own answer (all of its headers).
func (r *recorder) writeTo(w http.ResponseWriter) {
	dst := w.Header()
	for k, v := range r.header {
		dst[k] = v
	}
	setContentLength(dst, r.status, r.body.Len())
	w.WriteHeader(r.status)
	w.Write(r.body.Bytes()) //nolint:errcheck // the client may be gone; the answer is stored
}

// writeResponse sends a stored answer.
func writeResponse(w http.ResponseWriter, resp *response, replayed bool) {
	dst := w.Header()
	for k, v := range resp.Header {
		dst[k] = append([]string(nil), v...)
	}
	if replayed {
		dst.Set("Idempotent-Replayed", "true")
	}
	setContentLength(dst, resp.Status, len(resp.Body))
	w.WriteHeader(resp.Status)
	w.Write(resp.Body) //nolint:errcheck // the client may be gone
}

// setContentLength lets the client see a complete, non-chunked body; 204
// and 304 answers carry no body and must not announce one.
func setContentLength(h http.Header, status, n int) {
	if status == http.StatusNoContent || status == http.StatusNotModified {
		return
	}
	h.Set("Content-Length", strconv.Itoa(n))
}

// sameResponse reports whether a and b are the same answer: status, headers
// and body.
func sameResponse(a, b *response) bool {
	return a != nil && b != nil && a.Status == b.Status && bytes.Equal(a.Body, b.Body) && maps.EqualFunc(a.Header, b.Header, slices.Equal[[]string])
}
