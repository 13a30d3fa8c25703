package cloudapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Status statuses.
const (
	StatusSent      = "sent"
	StatusDelivered = "delivered"
	StatusRead      = "read"
	StatusFailed    = "failed"
)

// errorTitles are the titles Meta gives the error codes a test may ask for.
var errorTitles = map[int]string{
	131000: "Something went wrong",
	131026: "Message undeliverable",
	131047: "Re-engagement message",
	131049: "This message was not delivered to maintain healthy ecosystem engagement.",
	131056: "(Business Account, Consumer Account) pair rate limit hit",
}

// Status moves message id to status and returns the status webhook Meta
// would send about it, shaped as the status messages webhook reference
// documents it (statuses[] with id, status, timestamp, recipient_id or
// recipient_user_id, biz_opaque_callback_data when the send carried it, and
// errors[] for failed). A failed message releases its Idempotency-Key: it
// was never delivered, so a send with the same key goes out again.
// phoneNumberID fills metadata when the message came by /v1/messages.
func (s *Server) Status(id, status string, code int, phoneNumberID string) ([]byte, error) {
	switch status {
	case StatusSent, StatusDelivered, StatusRead, StatusFailed:
	default:
		return nil, fmt.Errorf("whatsapp: status %q: want sent, delivered, read or failed", status)
	}
	s.mu.Lock()
	var m *Message
	for _, x := range s.messages {
		if x.ID == id {
			m = x
		}
	}
	if m == nil {
		s.mu.Unlock()
		return nil, fmt.Errorf("whatsapp: no message %q", id)
	}
	m.Status = status
	if status == StatusFailed && m.scope != "" {
		delete(s.byKey, m.scope)
		m.scope = ""
	}
	snap := *m
	s.mu.Unlock()
	if snap.PhoneNumberID != "" {
		phoneNumberID = snap.PhoneNumberID
	}
	st := map[string]any{"id": snap.ID, "status": status, "timestamp": strconv.FormatInt(time.Now().Unix(), 10)}
	switch {
	case snap.GroupID != "":
		st["recipient_id"], st["recipient_type"] = snap.GroupID, "group"
	case snap.UserID != "":
		st["recipient_user_id"] = snap.UserID
	default:
		st["recipient_id"] = snap.WaID
	}
	if snap.CallbackData != "" {
		st["biz_opaque_callback_data"] = snap.CallbackData
	}
	value := map[string]any{
		"messaging_product": "whatsapp",
		"metadata":          map[string]string{"display_phone_number": "15550783881", "phone_number_id": phoneNumberID},
	}
	if status == StatusFailed {
		title := errorTitles[code]
		if title == "" {
			title = "Error"
		}
		st["errors"] = []any{map[string]any{"code": code, "title": title, "message": title,
			"error_data": map[string]string{"details": title},
			"href":       "https://developers.facebook.com/docs/whatsapp/cloud-api/support/error-codes/"}}
	} else {
		st["pricing"] = map[string]any{"billable": true, "pricing_model": "PMP", "category": "service", "type": "free_customer_service"}
		if snap.WaID != "" || snap.UserID != "" {
			c := map[string]any{"profile": map[string]string{"name": "Cliente"}}
			if snap.WaID != "" {
				c["wa_id"] = snap.WaID
			}
			if snap.UserID != "" {
				c["user_id"] = snap.UserID
			}
			value["contacts"] = []any{c}
		}
	}
	value["statuses"] = []any{st}
	return json.Marshal(map[string]any{"object": "whatsapp_business_account", "entry": []any{map[string]any{
		"id": "102290129340398", "changes": []any{map[string]any{"field": "messages", "value": value}},
	}}})
}

// statusHandler is POST /_sandbox/messages/{id}/status
// {"status":"failed","code":131000,"phone_number_id":"..."}: the status
// webhook body, for a test to deliver.
func (s *Server) statusHandler(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Status        string `json:"status"`
		Code          int    `json:"code"`
		PhoneNumberID string `json:"phone_number_id"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&req); err != nil {
		writeGraphError(w, http.StatusBadRequest, 100, "(#100) Invalid JSON body")
		return
	}
	body, err := s.Status(r.PathValue("id"), req.Status, req.Code, req.PhoneNumberID)
	if err != nil {
		writeGraphError(w, http.StatusBadRequest, 100, "(#100) "+err.Error())
		return
	}
	writeRaw(w, http.StatusOK, body)
}
