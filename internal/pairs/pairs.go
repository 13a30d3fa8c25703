package pairs

import (
	"errors"
	"fmt"
	"strings"
)

// ErrEmpty: the list has no entry.
var ErrEmpty = errors.New("no entries")

// Pair is one key=value entry of a list.
type Pair struct {
	Key, Value string
	N          int // its position in the list, from 1
}

// Split reads the list s of entries shaped like shape ("tenant=token"),
// which the errors name. A key may appear more than once; a value may
// contain "=" (only the first one splits).
func Split(s, shape string) ([]Pair, error) {
	var out []Pair
	for i, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		k, v, ok := strings.Cut(entry, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" || v == "" {
			return nil, fmt.Errorf("entry %d: want %s", i+1, shape)
		}
		out = append(out, Pair{Key: k, Value: v, N: i + 1})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: want %s entries, comma separated", ErrEmpty, shape)
	}
	return out, nil
}

// Map is Split for lists whose keys are unique: a key given twice is an
// error naming the key (keys are names, not secrets).
func Map(s, shape string) (map[string]string, error) {
	ps, err := Split(s, shape)
	if err != nil {
		return nil, err
	}
	keyName, _, _ := strings.Cut(shape, "=")
	out := make(map[string]string, len(ps))
	for _, p := range ps {
		if _, dup := out[p.Key]; dup {
			return nil, fmt.Errorf("entry %d: %s %q given twice", p.N, keyName, p.Key)
		}
		out[p.Key] = p.Value
	}
	return out, nil
}
