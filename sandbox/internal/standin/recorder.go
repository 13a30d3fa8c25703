package standin

import "net/http"

// Recorder is a ResponseWriter that remembers the first status written.
type Recorder struct {
	http.ResponseWriter
	// Status is the status answered, 0 until the handler writes.
	Status int
}

// WriteHeader remembers the first status.
func (r *Recorder) WriteHeader(code int) {
	if r.Status == 0 {
		r.Status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

// Write remembers 200 when the handler writes a body first.
func (r *Recorder) Write(b []byte) (int, error) {
	if r.Status == 0 {
		r.Status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach Hijack and Flush underneath.
func (r *Recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
