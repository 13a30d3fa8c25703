package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/retrysafe/retrysafe/agent"
	"github.com/retrysafe/retrysafe/derive"
	"github.com/retrysafe/retrysafe/tools"
)

func init() {
	Register(&Command{Name: "key", Summary: "derive idempotency keys from JSON lines on stdin", Run: runKey})
}

// maxKeyLine bounds one input line so that a stream with a missing newline
// cannot grow memory without limit.
const maxKeyLine = 1 << 20

type keyInput struct {
	Tenant  string         `json:"tenant"`
	Action  string         `json:"action"`
	Fields  map[string]any `json:"fields"`
	Version int            `json:"version"`
}

type keyOutput struct {
	Canonical string   `json:"canonical,omitempty"`
	Key       string   `json:"key,omitempty"`
	Ignored   []string `json:"ignored,omitempty"`
	Error     string   `json:"error,omitempty"`
}

func runKey(ctx context.Context, e *Env, args []string) error {
	fs := NewFlagSet(e, "key", "key < requests.jsonl > keys.jsonl",
		`Reads one JSON object per line on stdin:
  {"tenant":"t","action":"pix.cobranca","fields":{...},"version":1}
("version" is optional: the action's default) and writes one line per input,
in order: {"canonical":"...","key":"..."} (plus "ignored":[...] when fields
the schema does not name were dropped), or {"error":"..."}. Exits 1 if any
line failed. Streams: memory stays flat however long the input.

The HMAC secret comes from RETRYSAFE_HMAC_KEY (at least 32 bytes).
Known actions: every registered tool's action at each of its rule
versions (pix.charge, whatsapp.send_template, email.send: versions 2 and
3, default 3; whatsapp.send_text: version 2) and the reference actions
pix.cobranca and email.cobranca (versions 1 to 3, default 1).`)
	if err := ParseFlags(e, fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(e.Stderr, "key: unexpected argument %q (input comes from stdin)\n", fs.Arg(0))
		return ErrUsage
	}
	secret := e.Getenv("RETRYSAFE_HMAC_KEY")
	if secret == "" {
		return usageErr(errors.New("RETRYSAFE_HMAC_KEY is not set: set it to a secret of at least 32 bytes"))
	}
	d, err := keyDeriver([]byte(secret))
	if err != nil {
		return usageErr(fmt.Errorf("RETRYSAFE_HMAC_KEY: %w", err))
	}
	failed, err := deriveStream(ctx, d, e.Stdin, e.Stdout)
	if err != nil {
		return err
	}
	if failed > 0 {
		fmt.Fprintf(e.Stderr, "key: %d line(s) failed\n", failed)
		return ErrSilentFailure
	}
	return nil
}

// keyDeriver knows every registered tool's action (at each version it has
// had, the current one by default) and the reference actions.
func keyDeriver(secret []byte) (*derive.Deriver, error) {
	schemas := append(derive.BuiltinSchemas(), tools.BuiltinToolSchemas()...)
	schemas = append(schemas, agent.ReplyToolSchema())
	defaults := map[string]int{}
	for _, s := range schemas {
		if s.Action != "pix.cobranca" && s.Action != "email.cobranca" && s.Version > defaults[s.Action] {
			defaults[s.Action] = s.Version
		}
	}
	return derive.New(derive.Config{Secret: secret, Schemas: schemas, DefaultVersions: defaults})
}

// deriveStream handles one line at a time and flushes whenever the input
// has nothing buffered, so an interactive producer sees each answer.
func deriveStream(ctx context.Context, d *derive.Deriver, in io.Reader, out io.Writer) (failed int, err error) {
	br := bufio.NewReaderSize(in, 64<<10)
	bw := bufio.NewWriterSize(out, 64<<10)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	lineNo := 0
	for {
		if err := ctx.Err(); err != nil {
			return failed, err
		}
		if br.Buffered() == 0 {
			if err := bw.Flush(); err != nil {
				return failed, err
			}
		}
		line, tooLong, rerr := readLine(br)
		if rerr == io.EOF && len(line) == 0 && !tooLong {
			break
		}
		if rerr != nil && rerr != io.EOF {
			return failed, fmt.Errorf("read stdin: %w", rerr)
		}
		lineNo++
		var o keyOutput
		if tooLong {
			o.Error = fmt.Sprintf("line %d: longer than %d bytes", lineNo, maxKeyLine)
		} else if len(bytes.TrimSpace(line)) == 0 {
			lineNo--
			if rerr == io.EOF {
				break
			}
			continue
		} else {
			o = deriveLine(d, line, lineNo)
		}
		if o.Error != "" {
			failed++
		}
		if err := enc.Encode(&o); err != nil {
			return failed, err
		}
		if rerr == io.EOF {
			break
		}
	}
	return failed, bw.Flush()
}

// readLine returns the next line without its newline. A line over
// maxKeyLine is consumed and reported as too long.
func readLine(br *bufio.Reader) (line []byte, tooLong bool, err error) {
	var buf []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(buf)+len(chunk) > maxKeyLine {
			tooLong = true
		} else {
			buf = append(buf, chunk...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if tooLong {
			buf = nil
		}
		return bytes.TrimSuffix(bytes.TrimSuffix(buf, []byte{'\n'}), []byte{'\r'}), tooLong, err
	}
}

func deriveLine(d *derive.Deriver, line []byte, lineNo int) keyOutput {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber() // amounts are read as decimals, never as float64
	dec.DisallowUnknownFields()
	var in keyInput
	if err := dec.Decode(&in); err != nil {
		return keyOutput{Error: fmt.Sprintf("line %d: not a request object: %s", lineNo, jsonProblem(err))}
	}
	if dec.More() {
		return keyOutput{Error: fmt.Sprintf("line %d: trailing data after the object", lineNo)}
	}
	if in.Fields == nil {
		return keyOutput{Error: fmt.Sprintf("line %d: \"fields\" is missing", lineNo)}
	}
	r, err := d.Derive(in.Tenant, in.Action, in.Fields, &derive.Opts{Version: in.Version})
	if err != nil {
		return keyOutput{Error: fmt.Sprintf("line %d: %v", lineNo, err)}
	}
	return keyOutput{Canonical: string(r.Canonical), Key: r.Key, Ignored: r.Ignored}
}
