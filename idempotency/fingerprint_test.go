package idempotency_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/retrysafe/retrysafe/idempotency"
)

func TestCanonicalJSON(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{`{"b":1,"a":2}`, `{"a":2,"b":1}`},
		{" {\n\t\"a\" : [ 1 , 2 ,{ \"z\":null,\"y\":true } ] } ", `{"a":[1,2,{"y":true,"z":null}]}`},
		{`{"s":"\u00e3\u003c\/"}`, `{"s":"ã</"}`},
		{`{"s":"a\"b\\c\nd\u0001"}`, `{"s":"a\"b\\c\nd\u0001"}`},
		{`{"n":1.0,"m":1e2,"k":-0}`, `{"k":-0,"m":1e2,"n":1.0}`},
		{`"x"`, `"x"`},
		{`{"é":1,"e":2,"z":3}`, `{"e":2,"z":3,"é":1}`},
	} {
		got, ok := idempotency.CanonicalJSON([]byte(tc.in))
		if !ok || string(got) != tc.want {
			t.Errorf("CanonicalJSON(%s) = %s, %v; want %s", tc.in, got, ok, tc.want)
		}
	}
	for _, bad := range []string{``, `{`, `{"a":1}{}`, `{"a":1,"a":2}`, "{\"a\":\"\xff\"}", `[1,]`, strings.Repeat("[", 600) + strings.Repeat("]", 600)} {
		if got, ok := idempotency.CanonicalJSON([]byte(bad)); ok {
			t.Errorf("CanonicalJSON(%.40q) = %s, accepted", bad, got)
		}
	}
}

func TestFingerprint(t *testing.T) {
	t.Parallel()
	fp := func(method, path, query, body string) [32]byte {
		return idempotency.Fingerprint(method, path, query, []byte(body))
	}
	base := fp("POST", "/v1/charges", "a=1&b=2", `{"amount":100,"to":"x"}`)
	same := map[string][32]byte{
		"key order and space": fp("POST", "/v1/charges", "a=1&b=2", "{ \"to\" : \"x\",\n \"amount\":100 }"),
		"query order":         fp("POST", "/v1/charges", "b=2&a=1", `{"amount":100,"to":"x"}`),
		"method case":         fp("post", "/v1/charges", "a=1&b=2", `{"amount":100,"to":"x"}`),
	}
	for name, got := range same {
		if got != base {
			t.Errorf("%s changed the fingerprint", name)
		}
	}
	differ := map[string][32]byte{
		"amount":  fp("POST", "/v1/charges", "a=1&b=2", `{"amount":101,"to":"x"}`),
		"method":  fp("PUT", "/v1/charges", "a=1&b=2", `{"amount":100,"to":"x"}`),
		"path":    fp("POST", "/v1/charges/2", "a=1&b=2", `{"amount":100,"to":"x"}`),
		"query":   fp("POST", "/v1/charges", "a=1", `{"amount":100,"to":"x"}`),
		"no body": fp("POST", "/v1/charges", "a=1&b=2", ``),
	}
	for name, got := range differ {
		if got == base {
			t.Errorf("%s did not change the fingerprint", name)
		}
	}
	// Parts are length-prefixed: moving bytes between parts changes it.
	if fp("POST", "/a", "", "b") == fp("POST", "/ab", "", "") {
		t.Error("part boundaries are ambiguous")
	}
	// A non-JSON body is hashed raw, and differs from its JSON look-alike.
	if fp("POST", "/", "", `"x"`) == fp("POST", "/", "", `"x" `+"\x00") {
		t.Error("raw body collided")
	}
}

// FuzzCanonicalJSON: no input panics; a canonical form is valid JSON and
// a fixed point; and the same document re-encoded with shuffled keys, other
// white space and other string escapes has the same canonical form and the
// same fingerprint.
func FuzzCanonicalJSON(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `[]`, `{"amount_cents":1000,"pix_key":"a@b.c","nested":{"z":[1,2.50,"ã"],"a":null}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, ok := idempotency.CanonicalJSON(data)
		fpData := idempotency.Fingerprint("POST", "/x", "", data)
		if !ok {
			return
		}
		if !json.Valid(c) {
			t.Fatalf("canonical form is not JSON: %q", c)
		}
		if again, ok := idempotency.CanonicalJSON(c); !ok || !bytes.Equal(again, c) {
			t.Fatalf("not a fixed point: %q -> %q", c, again)
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("canonicalized but does not decode: %v", err)
		}
		rnd := rand.New(rand.NewPCG(uint64(len(data)), 7))
		var shuffled bytes.Buffer
		encodeShuffled(&shuffled, v, rnd)
		c2, ok := idempotency.CanonicalJSON(shuffled.Bytes())
		if !ok || !bytes.Equal(c, c2) {
			t.Fatalf("re-encoding changed the canonical form:\n%q\n%q\nvia %q", c, c2, shuffled.Bytes())
		}
		if len(data) > 0 && idempotency.Fingerprint("POST", "/x", "", shuffled.Bytes()) != fpData {
			t.Fatal("re-encoding changed the fingerprint")
		}
	})
}

// encodeShuffled writes v with object keys in random order, random white
// space and HTML-escaped strings (what encoding/json does by default).
func encodeShuffled(b *bytes.Buffer, v any, rnd *rand.Rand) {
	ws := func() {
		b.WriteString([]string{"", " ", "\n", "\t ", "\r\n  "}[rnd.IntN(5)])
	}
	ws()
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		rnd.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			kb, _ := json.Marshal(k)
			ws()
			b.Write(kb)
			ws()
			b.WriteByte(':')
			encodeShuffled(b, x[k], rnd)
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			encodeShuffled(b, e, rnd)
		}
		b.WriteByte(']')
	default:
		vb, err := json.Marshal(x)
		if err != nil {
			panic(fmt.Sprint(x, err))
		}
		b.Write(vb)
	}
	ws()
}
