package psp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Charge is the charge object the API returns.
type Charge struct {
	ID             string `json:"id"`
	Object         string `json:"object"` // "pix_charge"
	AmountCents    int64  `json:"amount_cents"`
	PixKey         string `json:"pix_key"`
	PixKeyType     string `json:"pix_key_type"`
	Description    string `json:"description"`
	Status         string `json:"status"` // always "paid" in the sandbox
	IdempotencyKey string `json:"idempotency_key"`
	Created        int64  `json:"created"` // unix seconds, database clock
}

// ChargeRequest is the body of POST /v1/pix/charges.
type ChargeRequest struct {
	AmountCents *int64  `json:"amount_cents"`
	PixKey      *string `json:"pix_key"`
	PixKeyType  string  `json:"pix_key_type"` // inferred from the key when empty, as DICT formats allow
	Description string  `json:"description"`
}

// MaxAmountCents is the largest charge the sandbox accepts (R$ 1,000,000.00).
const MaxAmountCents = 100_000_000

// APIError is the PSP's error answer, shaped like Stripe's:
// {"error":{"type":...,"code":...,"param":...,"message":...}}.
type APIError struct {
	Status  int    `json:"-"`
	Type    string `json:"type"` // invalid_request_error, authentication_error, api_error
	Code    string `json:"code"`
	Param   string `json:"param,omitempty"`
	Message string `json:"message"`
}

func (e *APIError) Error() string { return e.Message }

func (e *APIError) write(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	json.NewEncoder(w).Encode(map[string]*APIError{"error": e}) //nolint:errcheck
}

func badRequest(code, param, msg string) *APIError {
	return &APIError{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: code, Param: param, Message: msg}
}

func unprocessable(code, param, msg string) *APIError {
	return &APIError{Status: http.StatusUnprocessableEntity, Type: "invalid_request_error", Code: code, Param: param, Message: msg}
}

// ParseChargeRequest decodes and validates a charge body the way a PSP
// would: malformed JSON, unknown or mistyped parameters and missing ones
// are 400; well-formed values that cannot be charged are 422.
func ParseChargeRequest(body []byte) (ChargeRequest, *APIError) {
	var in ChargeRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		var typeErr *json.UnmarshalTypeError
		switch {
		case errors.As(err, &typeErr):
			return in, badRequest("parameter_invalid_type", typeErr.Field,
				fmt.Sprintf("%s must be a %s", typeErr.Field, jsonKind(typeErr.Field)))
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
			return in, badRequest("parameter_unknown", field, "Received unknown parameter: "+field)
		default:
			return in, badRequest("body_invalid", "", "The request body must be a JSON object.")
		}
	}
	if _, err := dec.Token(); err != io.EOF {
		return in, badRequest("body_invalid", "", "The request body must be a single JSON object.")
	}
	switch {
	case in.AmountCents == nil:
		return in, badRequest("parameter_missing", "amount_cents", "Missing required param: amount_cents.")
	case in.PixKey == nil:
		return in, badRequest("parameter_missing", "pix_key", "Missing required param: pix_key.")
	}
	switch amount := *in.AmountCents; {
	case amount <= 0:
		return in, unprocessable("amount_too_small", "amount_cents", "amount_cents must be a positive number of cents.")
	case amount > MaxAmountCents:
		return in, unprocessable("amount_too_large", "amount_cents", fmt.Sprintf("amount_cents must be at most %d.", MaxAmountCents))
	}
	if utf8.RuneCountInString(in.Description) > 140 {
		return in, unprocessable("parameter_invalid", "description", "description must be at most 140 characters.")
	}
	if in.PixKeyType == "" {
		in.PixKeyType = inferPixKeyType(*in.PixKey)
		if in.PixKeyType == "" {
			return in, unprocessable("pix_key_invalid", "pix_key", "pix_key is not a valid Pix key of any type.")
		}
	}
	if err := validatePixKey(in.PixKeyType, *in.PixKey); err != nil {
		return in, err
	}
	return in, nil
}

func jsonKind(field string) string {
	if field == "amount_cents" {
		return "integer number of cents"
	}
	return "string"
}

var (
	emailRe = regexp.MustCompile(`^[A-Za-z0-9._%+\-]+@[A-Za-z0-9.\-]+\.[A-Za-z]{2,}$`)
	phoneRe = regexp.MustCompile(`^\+55[1-9][0-9]{9,10}$`)
	evpRe   = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	digits  = regexp.MustCompile(`^[0-9]+$`)
)

// inferPixKeyType recognizes a key's type from its DICT format: the five
// formats do not overlap (a phone always carries +55, so 11 bare digits are
// a CPF). "" when the key has none of them.
func inferPixKeyType(key string) string {
	switch {
	case evpRe.MatchString(key):
		return "evp"
	case strings.HasPrefix(key, "+"):
		return "phone"
	case strings.Contains(key, "@"):
		return "email"
	case digits.MatchString(key) && len(key) == 11:
		return "cpf"
	case digits.MatchString(key) && len(key) == 14:
		return "cnpj"
	}
	return ""
}

// validatePixKey checks a key against its type as the DICT directory
// formats them: CPF 11 and CNPJ 14 digits with valid check digits, e-mail,
// phone in E.164 with +55, EVP a UUID.
func validatePixKey(kind, key string) *APIError {
	invalid := func() *APIError {
		return unprocessable("pix_key_invalid", "pix_key", fmt.Sprintf("pix_key is not a valid %s key.", kind))
	}
	switch kind {
	case "cpf":
		if len(key) != 11 || !digits.MatchString(key) || !checkDigitsOK(key, 9) {
			return invalid()
		}
	case "cnpj":
		if len(key) != 14 || !digits.MatchString(key) || !checkDigitsOK(key, 12) {
			return invalid()
		}
	case "email":
		if len(key) > 77 || !emailRe.MatchString(key) {
			return invalid()
		}
	case "phone":
		if !phoneRe.MatchString(key) {
			return invalid()
		}
	case "evp":
		if !evpRe.MatchString(key) {
			return invalid()
		}
	default:
		return unprocessable("pix_key_type_invalid", "pix_key_type", "pix_key_type must be one of cpf, cnpj, email, phone, evp.")
	}
	return nil
}

// checkDigitsOK verifies the two mod-11 check digits of a CPF (base 9) or
// CNPJ (base 12), and rejects numbers of one repeated digit.
func checkDigitsOK(s string, base int) bool {
	if strings.Count(s, s[:1]) == len(s) {
		return false
	}
	d := make([]int, len(s))
	for i := range s {
		d[i] = int(s[i] - '0')
	}
	for pos := base; pos < base+2; pos++ {
		sum := 0
		for i := range pos {
			var w int
			if base == 9 { // CPF: weights pos+1 down to 2
				w = pos + 1 - i
			} else { // CNPJ: weights cycle 2..9 from the right
				w = 2 + (pos-1-i)%8
			}
			sum += d[i] * w
		}
		check := sum % 11
		if check < 2 {
			check = 0
		} else {
			check = 11 - check
		}
		if d[pos] != check {
			return false
		}
	}
	return true
}
