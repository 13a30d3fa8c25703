package agenttest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
)

// TextMessage is one inbound text message of a webhook payload.
type TextMessage struct {
	ID   string // "wamid..."
	From string // the sender's wa_id
	Body string
	// At is the provider's timestamp. Zero: the current hour, so that
	// the customer-service window is open (and two payloads built for one
	// message agree, short of an hour boundary).
	At time.Time
}

// WebhookPayload builds a WhatsApp Cloud API "messages" webhook body for
// messages received on phoneNumberID.
func WebhookPayload(phoneNumberID string, msgs ...TextMessage) []byte {
	type text struct {
		Body string `json:"body"`
	}
	type message struct {
		From      string `json:"from"`
		ID        string `json:"id"`
		Timestamp string `json:"timestamp"`
		Type      string `json:"type"`
		Text      text   `json:"text"`
	}
	var ms []message
	var contacts []map[string]any
	for _, m := range msgs {
		at := m.At
		if at.IsZero() {
			at = time.Now().Truncate(time.Hour)
		}
		ms = append(ms, message{From: m.From, ID: m.ID, Timestamp: fmt.Sprint(at.Unix()), Type: "text", Text: text{m.Body}})
		contacts = append(contacts, map[string]any{"profile": map[string]string{"name": "Cliente"}, "wa_id": m.From})
	}
	p := map[string]any{
		"object": "whatsapp_business_account",
		"entry": []any{map[string]any{
			"id": "102290129340398",
			"changes": []any{map[string]any{
				"field": "messages",
				"value": map[string]any{
					"messaging_product": "whatsapp",
					"metadata":          map[string]string{"display_phone_number": "15550783881", "phone_number_id": phoneNumberID},
					"contacts":          contacts,
					"messages":          ms,
				},
			}},
		}},
	}
	b, _ := json.Marshal(p)
	return b
}

// StatusPayload builds a delivery-status webhook body (no messages).
func StatusPayload(phoneNumberID, messageID string) []byte {
	p := map[string]any{
		"object": "whatsapp_business_account",
		"entry": []any{map[string]any{
			"id": "102290129340398",
			"changes": []any{map[string]any{
				"field": "messages",
				"value": map[string]any{
					"messaging_product": "whatsapp",
					"metadata":          map[string]string{"phone_number_id": phoneNumberID},
					"statuses":          []any{map[string]any{"id": messageID, "status": "delivered", "timestamp": "1732900001", "recipient_id": "5511987654321"}},
				},
			}},
		}},
	}
	b, _ := json.Marshal(p)
	return b
}

// Sign is the X-Hub-Signature-256 value for body.
func Sign(appSecret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(appSecret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}
