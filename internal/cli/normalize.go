package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/retrysafe/retrysafe/derive"
)

func init() {
	Register(&Command{Name: "normalize", Summary: "normalize single values by a derive rule, JSON lines on stdin", Run: runNormalize})
}

type normalizeInput struct {
	Rule    derive.Rule `json:"rule"`
	Version int         `json:"version"`
	Value   any         `json:"value"`
}

type normalizeOutput struct {
	Value  string `json:"value,omitempty"`
	Type   string `json:"type,omitempty"`
	Error  string `json:"error,omitempty"`
	Reason string `json:"reason,omitempty"`
}

func normalizeHelp() string {
	var rules []string
	for _, r := range derive.Rules() {
		rules = append(rules, string(r))
	}
	return fmt.Sprintf(`Reads one JSON object per line on stdin:
  {"rule":"taxid","version":3,"value":"12.ABC.345/01DE-35"}
and writes one line per input, in order:
  {"value":"12ABC34501DE35","type":"cnpj"}        ("type" for taxid v3 and pix_key v2+)
  {"error":"invalid field","reason":"CNPJ check digits do not match"}
"error" is the kind (missing required field, invalid field, ambiguous
field); "reason" says why, never echoing the value. The value may be a JSON
string or number (numbers are read exactly, as the key command does).

Rules: %s.
Versions: %d to %d. 1 is the reference derivation (Python's str.strip,
str.lower, str.isalnum); 2 types and validates Pix keys, CPF/CNPJ and
phones; 3 adds the alphanumeric CNPJ, mobile-only Pix phone keys, a refused
leading 00, practical RFC 5321 e-mail, input hygiene (control, invisible
format characters), a %d-character limit and refuses zero amounts.

Exits 1 if a line is not a request (bad JSON, unknown rule or version); a
value its rule refuses is an answer, not a failure.`, strings.Join(rules, ", "), derive.MinVersion, derive.MaxVersion, derive.DefaultMaxLen)
}

func runNormalize(ctx context.Context, e *Env, args []string) error {
	fs := NewFlagSet(e, "normalize", "normalize < values.jsonl > normalized.jsonl", normalizeHelp())
	if err := ParseFlags(e, fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(e.Stderr, "normalize: unexpected argument %q (input comes from stdin)\n", fs.Arg(0))
		return ErrUsage
	}
	br := bufio.NewReaderSize(e.Stdin, 64<<10)
	bw := bufio.NewWriterSize(e.Stdout, 64<<10)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	failed, lineNo := 0, 0
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if br.Buffered() == 0 {
			if err := bw.Flush(); err != nil {
				return err
			}
		}
		line, tooLong, rerr := readLine(br)
		if rerr == io.EOF && len(line) == 0 && !tooLong {
			break
		}
		if rerr != nil && rerr != io.EOF {
			return fmt.Errorf("read stdin: %w", rerr)
		}
		if !tooLong && len(bytes.TrimSpace(line)) == 0 {
			if rerr == io.EOF {
				break
			}
			continue
		}
		lineNo++
		var o normalizeOutput
		var bad bool
		if tooLong {
			o, bad = normalizeOutput{Error: "bad request", Reason: fmt.Sprintf("line %d: longer than %d bytes", lineNo, maxKeyLine)}, true
		} else {
			o, bad = normalizeLine(line, lineNo)
		}
		if bad {
			failed++
		}
		if err := enc.Encode(&o); err != nil {
			return err
		}
		if rerr == io.EOF {
			break
		}
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if failed > 0 {
		fmt.Fprintf(e.Stderr, "normalize: %d line(s) were not requests\n", failed)
		return ErrSilentFailure
	}
	return nil
}

func normalizeLine(line []byte, lineNo int) (normalizeOutput, bool) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	var in normalizeInput
	if err := dec.Decode(&in); err != nil {
		return normalizeOutput{Error: "bad request", Reason: fmt.Sprintf("line %d: not a request object: %s", lineNo, jsonProblem(err))}, true
	}
	if dec.More() {
		return normalizeOutput{Error: "bad request", Reason: fmt.Sprintf("line %d: trailing data after the object", lineNo)}, true
	}
	if in.Version == 0 {
		return normalizeOutput{Error: "bad request", Reason: fmt.Sprintf("line %d: \"version\" is missing (%d to %d)", lineNo, derive.MinVersion, derive.MaxVersion)}, true
	}
	n, err := derive.NormalizeValue(in.Rule, in.Version, in.Value)
	var fe *derive.FieldError
	switch {
	case err == nil:
		return normalizeOutput{Value: n.Value, Type: string(n.Type)}, false
	case errors.As(err, &fe):
		if fe.Kind == derive.ErrMissingField {
			return normalizeOutput{Error: fe.Kind.Error(), Reason: "empty"}, false
		}
		return normalizeOutput{Error: fe.Kind.Error(), Reason: fe.Reason}, false
	}
	return normalizeOutput{Error: "bad request", Reason: fmt.Sprintf("line %d: %v", lineNo, err)}, true
}
