package cloudapi

import (
	"net/http"

	"github.com/retrysafe/retrysafe/sandbox/internal/standin"
)

// writeJSON answers v as the Cloud API does: JSON with its length, HTML
// characters left as they are.
func writeJSON(w http.ResponseWriter, status int, v any) { standin.WriteJSON(w, status, v) }
