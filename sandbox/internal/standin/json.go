package standin

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
)

// WriteJSON answers v as JSON with its Content-Length, HTML characters
// left as they are (as the APIs the stand-ins play send them).
func WriteJSON(w http.ResponseWriter, status int, v any) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(b.Len()))
	w.WriteHeader(status)
	w.Write(b.Bytes()) //nolint:errcheck // the client may be gone
}

// Healthz answers a stand-in's GET /healthz: {"status":"ok"}.
func Healthz(w http.ResponseWriter, _ *http.Request) {
	WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}
