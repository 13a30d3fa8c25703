package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/retrysafe/retrysafe/derive"
)

const testSecret = "segredo-de-teste-nao-usar-em-producao"

func testEnv(stdin io.Reader, vars map[string]string) (*Env, *bytes.Buffer, *bytes.Buffer) {
	var out, errb bytes.Buffer
	return &Env{Stdin: stdin, Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return vars[k] }}, &out, &errb
}

// The command reproduces every reference vector, in order.
func TestKeyCommandVectors(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../testdata/derive-v1.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var in bytes.Buffer
	var want []string
	for _, line := range bytes.Split(bytes.TrimSpace(raw), []byte("\n")) {
		var v struct {
			Tenant, Action, Canonical, Key string
			Fields                         json.RawMessage
		}
		if err := json.Unmarshal(line, &v); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&in, `{"tenant":%q,"action":%q,"fields":%s}`+"\n", v.Tenant, v.Action, v.Fields)
		want = append(want, v.Key+" "+v.Canonical)
	}
	e, out, errb := testEnv(&in, map[string]string{"RETRYSAFE_HMAC_KEY": testSecret})
	if code := Run(context.Background(), e, []string{"key"}); code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != len(want) {
		t.Fatalf("%d output lines for %d inputs", len(lines), len(want))
	}
	for i, l := range lines {
		var o keyOutput
		if err := json.Unmarshal([]byte(l), &o); err != nil {
			t.Fatal(err)
		}
		if got := o.Key + " " + o.Canonical; got != want[i] {
			t.Errorf("line %d:\n got %s\nwant %s", i+1, got, want[i])
		}
	}
}

func TestKeyCommandErrors(t *testing.T) {
	t.Parallel()
	in := strings.Join([]string{
		`{"tenant":"t","action":"pix.cobranca","fields":{"cliente_id":"c","valor":"0.001","chave_pix_destino":"a@b.c","referencia_intencao":"r"}}`,
		`not json`,
		``,
		`{"tenant":"t","action":"nope","fields":{}}`,
		`{"tenant":"t","action":"email.cobranca","fields":{"cliente_id":"c","referencia_intencao":"r","template":"T"},"version":2}`,
	}, "\n")
	e, out, errb := testEnv(strings.NewReader(in), map[string]string{"RETRYSAFE_HMAC_KEY": testSecret})
	if code := Run(context.Background(), e, []string{"key"}); code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("want 4 lines (blank line skipped), got %q", lines)
	}
	for i, want := range []string{`sub-cent`, `line 2: not a request object`, `unknown action`, `"key":"`} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("line %d = %s, want it to contain %s", i+1, lines[i], want)
		}
	}
	if !strings.Contains(errb.String(), "3 line(s) failed") {
		t.Errorf("stderr: %s", errb)
	}
}

func TestKeyCommandNeedsSecret(t *testing.T) {
	t.Parallel()
	e, _, errb := testEnv(strings.NewReader(""), nil)
	if code := Run(context.Background(), e, []string{"key"}); code != ExitUsage || !strings.Contains(errb.String(), "RETRYSAFE_HMAC_KEY") {
		t.Fatalf("exit %d: %s", code, errb)
	}
	e, _, errb = testEnv(strings.NewReader(""), map[string]string{"RETRYSAFE_HMAC_KEY": "short"})
	if code := Run(context.Background(), e, []string{"key"}); code != ExitUsage || !strings.Contains(errb.String(), "32 bytes") {
		t.Fatalf("exit %d: %s", code, errb)
	}
}

func TestHelpOnEveryCommand(t *testing.T) {
	t.Parallel()
	for name := range commands {
		e, out, _ := testEnv(strings.NewReader(""), nil)
		if code := Run(context.Background(), e, []string{name, "--help"}); code != 0 {
			t.Errorf("%s --help: exit %d", name, code)
		}
		if !strings.Contains(out.String(), "Usage: retrysafe "+name) {
			t.Errorf("%s --help printed %q", name, out.String())
		}
	}
}

// generator produces n request lines without holding them in memory.
type generator struct {
	n, i int
	buf  []byte
}

func (g *generator) Read(p []byte) (int, error) {
	for len(g.buf) < len(p) && g.i < g.n {
		g.buf = fmt.Appendf(g.buf, `{"tenant":"t%d","action":"pix.cobranca","fields":{"cliente_id":"C%d","valor":"%d,%02d","chave_pix_destino":"cliente%d@example.com","referencia_intencao":"NF-%d"}}`+"\n",
			g.i%7, g.i, g.i%100000, g.i%100, g.i, g.i)
		g.i++
	}
	if len(g.buf) == 0 {
		return 0, io.EOF
	}
	n := copy(p, g.buf)
	g.buf = g.buf[n:]
	return n, nil
}

type countingWriter struct{ lines, errs int }

func (c *countingWriter) Write(p []byte) (int, error) {
	c.lines += bytes.Count(p, []byte("\n"))
	c.errs += bytes.Count(p, []byte(`"error"`))
	return len(p), nil
}

// A long stream is handled line by line: the heap stays flat.
func TestKeyCommandStreams(t *testing.T) {
	t.Parallel()
	n := 200_000
	if testing.Short() {
		n = 20_000
	}
	d := mustDeriver(t)
	var peak uint64
	w := &countingWriter{}
	sampler := &sampling{inner: w, every: 1 << 20, peak: &peak}
	failed, err := deriveStream(context.Background(), d, bufio.NewReader(&generator{n: n}), sampler)
	if err != nil || failed != 0 || w.errs != 0 {
		t.Fatalf("failed=%d errs=%d err=%v", failed, w.errs, err)
	}
	if w.lines != n {
		t.Fatalf("%d lines out for %d in", w.lines, n)
	}
	if peak > 64<<20 {
		t.Fatalf("heap reached %d MiB streaming %d lines", peak>>20, n)
	}
}

type sampling struct {
	inner   io.Writer
	written int
	every   int
	peak    *uint64
}

func (s *sampling) Write(p []byte) (int, error) {
	s.written += len(p)
	if s.written >= s.every {
		s.written = 0
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		*s.peak = max(*s.peak, ms.HeapInuse)
	}
	return s.inner.Write(p)
}

func mustDeriver(t *testing.T) *derive.Deriver {
	t.Helper()
	d, err := derive.New(derive.Config{Secret: []byte(testSecret)})
	if err != nil {
		t.Fatal(err)
	}
	return d
}
