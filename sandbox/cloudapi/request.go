package cloudapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// sendRequest holds both shapes: the tools' {"to","template","language"}
// and the Cloud API's {"messaging_product","to","type","template":{...}}.
type sendRequest struct {
	MessagingProduct *string         `json:"messaging_product"`
	RecipientType    string          `json:"recipient_type"`
	To               string          `json:"to"`
	Recipient        string          `json:"recipient"`
	CallbackData     string          `json:"biz_opaque_callback_data"`
	Type             string          `json:"type"`
	Template         json.RawMessage `json:"template"`
	Language         string          `json:"language"`
	Text             *struct {
		Body       string `json:"body"`
		PreviewURL bool   `json:"preview_url"`
	} `json:"text"`
}

type cloudTemplate struct {
	Name     string `json:"name"`
	Language struct {
		Code string `json:"code"`
	} `json:"language"`
	Components json.RawMessage `json:"components"`
}

// parseSend validates a body of either shape; the string is the error.
func parseSend(body []byte, cloud bool) (*Message, string) {
	var req sendRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&req); err != nil {
		return nil, "Invalid JSON body: " + err.Error()
	}
	if req.MessagingProduct != nil && *req.MessagingProduct != "whatsapp" {
		return nil, `Invalid parameter: messaging_product must be "whatsapp"`
	}
	if cloud && req.MessagingProduct == nil {
		return nil, "The parameter messaging_product is required."
	}
	if req.RecipientType != "" && req.RecipientType != "individual" && req.RecipientType != "group" {
		return nil, `Invalid parameter: recipient_type must be "individual" or "group"`
	}
	if len(req.CallbackData) > 512 {
		return nil, "Invalid parameter: biz_opaque_callback_data is at most 512 characters"
	}
	m := &Message{To: req.To, CallbackData: req.CallbackData}
	if why := m.setRecipient(&req); why != "" {
		return nil, why
	}
	typ := req.Type
	if typ == "" {
		switch {
		case len(req.Template) > 0:
			typ = "template"
		case req.Text != nil:
			typ = "text"
		}
	}
	switch typ {
	case "template":
		m.Type = "template"
		if why := m.setTemplate(&req); why != "" {
			return nil, why
		}
	case "text":
		m.Type = "text"
		if req.Text == nil || strings.TrimSpace(req.Text.Body) == "" || len(req.Text.Body) > 4096 {
			return nil, "The parameter text.body is required and at most 4096 characters."
		}
		m.Text = req.Text.Body
	case "":
		return nil, "The parameter type is required (template or text)."
	default:
		return nil, fmt.Sprintf("Invalid parameter: type %q is not supported by the sandbox (template or text)", typ)
	}
	return m, ""
}

// setRecipient takes the recipient of req: a group, a business-scoped
// user id, or a phone number; the string is the error.
func (m *Message) setRecipient(req *sendRequest) string {
	switch {
	case req.RecipientType == "group":
		if req.To == "" || req.Recipient != "" {
			return "Invalid parameter: a group message needs to (the group id) and no recipient"
		}
		m.GroupID = req.To
	case req.Recipient != "" && req.To == "": // with both, to takes precedence
		if !reBSUID.MatchString(req.Recipient) {
			return "Invalid parameter: recipient must be a business-scoped user id"
		}
		m.UserID, m.To = req.Recipient, req.Recipient
	default:
		waID, ok := recipient(req.To)
		if !ok {
			return "Invalid parameter: to must be a phone number with 8 to 15 digits"
		}
		m.WaID = waID
	}
	return ""
}

// setTemplate takes the template of req, in the tools' flat shape (a
// name and a language) or the Cloud API's object; the string is the
// error.
func (m *Message) setTemplate(req *sendRequest) string {
	var name string
	if err := json.Unmarshal(req.Template, &name); err == nil {
		// The tools' flat shape.
		m.Template, m.Language = strings.TrimSpace(name), req.Language
		if m.Language == "" {
			m.Language = "pt_BR"
		}
	} else {
		var t cloudTemplate
		if err := json.Unmarshal(req.Template, &t); err != nil {
			return "Invalid parameter: template must be a name or a template object"
		}
		m.Template, m.Language, m.Components = t.Name, t.Language.Code, t.Components
		if m.Language == "" {
			return "The parameter template.language.code is required."
		}
	}
	if !reTemplate.MatchString(m.Template) {
		return "Invalid parameter: template name must be lower-case letters, digits and underscores"
	}
	if !reLanguage.MatchString(m.Language) {
		return "Invalid parameter: template language must look like pt_BR"
	}
	return ""
}

// recipient reduces a phone number to the digits WhatsApp calls the wa_id.
func recipient(to string) (string, bool) {
	var d strings.Builder
	for i, c := range strings.TrimSpace(to) {
		switch {
		case c >= '0' && c <= '9':
			d.WriteRune(c)
		case c == '+' && i == 0, c == ' ', c == '-', c == '(', c == ')', c == '.':
		default:
			return "", false
		}
	}
	n := d.Len()
	return d.String(), n >= 8 && n <= 15
}
