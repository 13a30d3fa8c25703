package derive_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/retrysafe/retrysafe/derive"
)

type vector struct {
	Secret    string         `json:"secret"`
	Tenant    string         `json:"tenant"`
	Action    string         `json:"action"`
	Fields    map[string]any `json:"fields"`
	Canonical string         `json:"canonical"`
	Key       string         `json:"key"`
}

// Every line of the reference vectors must be reproduced exactly: canonical
// bytes and key.
func TestReferenceVectorsV1(t *testing.T) {
	t.Parallel()
	testVectors(t, "../testdata/derive-v1.jsonl", 30)
}

// Keys CPython computes for the inputs where version 1 used to differ from
// the reference (upper-case EVP and alphanumeric keys with nothing to
// strip, Greek final sigma, dotted İ, C0 separators around values):
// produced by difftest/testdata/pyref.py's reference functions and
// Python's hmac.
func TestPythonVectorsV1(t *testing.T) {
	t.Parallel()
	testVectors(t, "testdata/derive-v1-python.jsonl", 5)
}

func testVectors(t *testing.T, path string, min int) {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	derivers := map[string]*derive.Deriver{}
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		n++
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.UseNumber()
		var v vector
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("line %d: %v", n, err)
		}
		d := derivers[v.Secret]
		if d == nil {
			if d, err = derive.New(derive.Config{Secret: []byte(v.Secret)}); err != nil {
				t.Fatal(err)
			}
			derivers[v.Secret] = d
		}
		r, err := d.Derive(v.Tenant, v.Action, v.Fields, &derive.Opts{Version: 1})
		if err != nil {
			t.Errorf("line %d: %v", n, err)
			continue
		}
		if string(r.Canonical) != v.Canonical {
			t.Errorf("line %d canonical:\n got %s\nwant %s", n, r.Canonical, v.Canonical)
		}
		if r.Key != v.Key {
			t.Errorf("line %d key: got %s want %s", n, r.Key, v.Key)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n < min {
		t.Fatalf("read only %d vectors", n)
	}
}
