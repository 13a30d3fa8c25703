package derive

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"
)

// MinSecretLen is the shortest HMAC secret accepted, in bytes.
const MinSecretLen = 32

// Config configures a Deriver.
type Config struct {
	// Secret is the HMAC key. Required, at least MinSecretLen bytes. All
	// services that must agree on keys share it.
	Secret []byte
	// Schemas are the actions this Deriver knows. Nil means
	// BuiltinSchemas(). Each (action, version) may appear once.
	Schemas []Schema
	// DefaultVersions picks the version used when a call does not name
	// one. An action missing here defaults to its lowest registered
	// version, so adding a version never changes existing keys.
	DefaultVersions map[string]int
}

// Deriver normalizes fields and computes keys. It is safe for concurrent use.
type Deriver struct {
	secret   []byte
	schemas  map[string]map[int]*compiled
	defaults map[string]int
	macs     sync.Pool
	bufs     sync.Pool
}

// New validates cfg and every schema in it.
func New(cfg Config) (*Deriver, error) {
	if len(cfg.Secret) < MinSecretLen {
		return nil, fmt.Errorf("%w (got %d)", ErrSecretTooShort, len(cfg.Secret))
	}
	schemas := cfg.Schemas
	if schemas == nil {
		schemas = BuiltinSchemas()
	}
	d := &Deriver{
		secret:   append([]byte(nil), cfg.Secret...),
		schemas:  map[string]map[int]*compiled{},
		defaults: map[string]int{},
	}
	for _, s := range schemas {
		c, err := compile(s)
		if err != nil {
			return nil, err
		}
		if d.schemas[s.Action] == nil {
			d.schemas[s.Action] = map[int]*compiled{}
		}
		if d.schemas[s.Action][s.Version] != nil {
			return nil, fmt.Errorf("%w: %s v%d registered twice", ErrSchema, s.Action, s.Version)
		}
		d.schemas[s.Action][s.Version] = c
		if cur, ok := d.defaults[s.Action]; !ok || s.Version < cur {
			d.defaults[s.Action] = s.Version
		}
	}
	for action, v := range cfg.DefaultVersions {
		if d.schemas[action][v] == nil {
			return nil, fmt.Errorf("%w: default version %d for %q has no schema", ErrSchema, v, action)
		}
		d.defaults[action] = v
	}
	d.macs.New = func() any { return hmac.New(sha256.New, d.secret) }
	d.bufs.New = func() any { b := make([]byte, 0, 512); return &b }
	return d, nil
}

// Schema returns the schema of action at version (0: its default version).
func (d *Deriver) Schema(action string, version int) (Schema, error) {
	c, err := d.lookup(action, version)
	if err != nil {
		return Schema{}, err
	}
	return c.Schema, nil
}

// DefaultVersion is the version used for action when a call names none.
func (d *Deriver) DefaultVersion(action string) (int, bool) {
	v, ok := d.defaults[action]
	return v, ok
}

// Actions lists the known actions, sorted.
func (d *Deriver) Actions() []string {
	out := make([]string, 0, len(d.schemas))
	for a := range d.schemas {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

func (d *Deriver) lookup(action string, version int) (*compiled, error) {
	versions, ok := d.schemas[action]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownAction, action)
	}
	if version == 0 {
		version = d.defaults[action]
	}
	c, ok := versions[version]
	if !ok {
		return nil, fmt.Errorf("%w: %q v%d", ErrUnknownVersion, action, version)
	}
	return c, nil
}

// Value is one normalized field.
type Value struct {
	Name  string
	Value string
}

// Payload is the normalized fields in canonical (code point) order.
type Payload []Value

// Get returns the value of name.
func (p Payload) Get(name string) (string, bool) {
	for _, v := range p {
		if v.Name == name {
			return v.Value, true
		}
	}
	return "", false
}

// Map returns the payload as a map.
func (p Payload) Map() map[string]string {
	m := make(map[string]string, len(p))
	for _, v := range p {
		m[v.Name] = v.Value
	}
	return m
}

// PayloadFromMap builds a canonical-order payload from a map (for example
// a frozen payload read back from the database).
func PayloadFromMap(m map[string]string) Payload {
	p := make(Payload, 0, len(m))
	for k, v := range m {
		p = append(p, Value{k, v})
	}
	sort.Slice(p, func(i, j int) bool { return p[i].Name < p[j].Name })
	return p
}

// MarshalJSON writes the payload as a JSON object in canonical order.
func (p Payload) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, v := range p {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, v.Name)
		b = append(b, ':')
		b = appendString(b, v.Value)
	}
	return append(b, '}'), nil
}

// UnmarshalJSON reads a JSON object of strings.
func (p *Payload) UnmarshalJSON(data []byte) error {
	var m map[string]string
	if err := json.Unmarshal(data, &m); err != nil {
		return err
	}
	*p = PayloadFromMap(m)
	return nil
}

// Diff lists the names whose values differ between p and q (present in one
// only, or different), sorted.
func (p Payload) Diff(q Payload) []string {
	var out []string
	i, j := 0, 0
	for i < len(p) || j < len(q) {
		switch {
		case j >= len(q) || (i < len(p) && p[i].Name < q[j].Name):
			out = append(out, p[i].Name)
			i++
		case i >= len(p) || q[j].Name < p[i].Name:
			out = append(out, q[j].Name)
			j++
		default:
			if p[i].Value != q[j].Value {
				out = append(out, p[i].Name)
			}
			i++
			j++
		}
	}
	return out
}

// Result is one derivation.
type Result struct {
	Tenant    string
	Action    string
	Version   int
	Payload   Payload
	Canonical []byte
	Key       string   // 64 lowercase hex characters
	Ignored   []string // input fields the schema does not name (sorted); not in the key
}

// Opts are per-call options. A nil *Opts means the defaults.
type Opts struct {
	// Version selects the rule version; 0 means the action's default.
	Version int
}

// Derive normalizes fields by the action's schema and computes the key.
// Values may be strings, json.Number (decode with UseNumber), float64,
// integers, or nil. An error names the field and never its value: a
// *FieldError when one field could not be normalized, FieldErrors when
// several could (FieldErrorsOf reads either).
func (d *Deriver) Derive(tenant, action string, fields map[string]any, opts *Opts) (*Result, error) {
	if tenant == "" || !utf8.ValidString(tenant) || strings.IndexByte(tenant, 0) >= 0 {
		return nil, ErrBadTenant
	}
	version := 0
	if opts != nil {
		version = opts.Version
	}
	c, err := d.lookup(action, version)
	if err != nil {
		return nil, err
	}
	payload, err := c.normalize(fields)
	if err != nil {
		return nil, err
	}
	var ignored []string
	for name := range fields {
		if !c.fieldSet[name] {
			ignored = append(ignored, name)
		}
	}
	sort.Strings(ignored)
	r := &Result{Tenant: tenant, Action: action, Version: c.Version, Payload: payload, Ignored: ignored}
	r.Canonical, r.Key = d.key(tenant, action, c.Version, payload)
	return r, nil
}

// KeyFor recomputes the canonical bytes and key of an already-normalized
// payload (a frozen one, for audit). It does not normalize again.
func (d *Deriver) KeyFor(tenant, action string, version int, p Payload) (canonical []byte, key string) {
	return d.key(tenant, action, version, p)
}

func (d *Deriver) key(tenant, action string, version int, p Payload) ([]byte, string) {
	bp := d.bufs.Get().(*[]byte)
	buf := appendCanonical((*bp)[:0], action, tenant, version, p)
	mac := d.macs.Get().(hash.Hash)
	mac.Reset()
	mac.Write(buf)
	n := len(buf)
	// The digest goes into the pooled buffer's spare room: a local array
	// would escape through the hash.Hash interface and cost an allocation.
	buf = mac.Sum(buf)
	d.macs.Put(mac)
	var hexed [2 * sha256.Size]byte
	hex.Encode(hexed[:], buf[n:])
	canonical := append([]byte(nil), buf[:n]...)
	*bp = buf
	d.bufs.Put(bp)
	return canonical, string(hexed[:])
}

// normalize walks the schema's fields in canonical order. It goes on past
// a field it cannot normalize, so that the error names every such field:
// a model told of one broken field at a time fixes them in as many turns.
func (c *compiled) normalize(fields map[string]any) (Payload, error) {
	p := make(Payload, 0, len(c.sorted))
	var errs FieldErrors
	for i := range c.sorted {
		f := &c.sorted[i]
		raw, present := fields[f.Name]
		if present && isBlank(raw, c.Version) {
			present = false
		}
		if c.isTypeField[i] && c.Version >= 2 {
			// Written together with its key field below.
			continue
		}
		if !present {
			if !f.Optional {
				errs = append(errs, fieldError(f.Name, errEmpty))
			}
			continue
		}
		if err := checkRawLen(raw, f, c.Version); err != nil {
			errs = append(errs, fieldError(f.Name, err))
			continue
		}
		if f.Rule == RulePixKey && c.Version >= 2 {
			var fe *FieldError
			if p, fe = c.pixKey(p, fields, f, raw); fe != nil {
				errs = append(errs, fe)
			}
			continue
		}
		v, _, err := f.Rule.normalize(raw, c.Version, f)
		if err == nil {
			err = checkLen(v, f, c.Version)
		}
		if err != nil {
			errs = append(errs, fieldError(f.Name, err))
			continue
		}
		p = append(p, Value{f.Name, v})
	}
	switch len(errs) {
	case 0:
	case 1:
		return nil, errs[0]
	default:
		return nil, errs
	}
	if len(c.typeOf) > 0 && c.Version >= 2 {
		// Type fields were appended beside their key fields; restore order
		// (an insertion sort: the payload is short and nearly sorted, and
		// sort.Slice would cost two allocations per key).
		for i := 1; i < len(p); i++ {
			for j := i; j > 0 && p[j].Name < p[j-1].Name; j-- {
				p[j], p[j-1] = p[j-1], p[j]
			}
		}
	}
	return p, nil
}

// pixKey appends f's Pix key, read by the type its type field states
// (when the schema has one), and that type; or says why it cannot.
func (c *compiled) pixKey(p Payload, fields map[string]any, f *Field, raw any) (Payload, *FieldError) {
	var stated PixKeyType
	tf := c.typeOf[f.Name]
	if tf != "" {
		if traw, ok := fields[tf]; ok && !isBlank(traw, c.Version) {
			s, _, err := RulePixKeyType.normalize(traw, c.Version, f)
			if err != nil {
				// The key is read by its stated type: with none that
				// can be read, it is not checked.
				return p, fieldError(tf, err)
			}
			stated = PixKeyType(s)
		}
	}
	key, typ, err := normalizePixKey(raw, stated, c.Version, f)
	if err == nil {
		err = checkLen(key, f, c.Version)
	}
	if err != nil {
		return p, fieldError(f.Name, err)
	}
	p = append(p, Value{f.Name, key})
	if tf != "" {
		p = append(p, Value{tf, string(typ)})
	}
	return p, nil
}

// checkRawLen refuses, before any normalization work, a string so long that
// no normalization could bring it within the field's limit (white space
// aside): a 900 KB id is not NFC-normalized just to be refused.
func checkRawLen(raw any, f *Field, version int) error {
	max := f.MaxLenFor(version)
	if s, ok := raw.(string); ok && max > 0 && len(s) > 4*max+1024 {
		return invalid("longer than %d characters", max)
	}
	return nil
}

func checkLen(v string, f *Field, version int) error {
	max := f.MaxLenFor(version)
	if max > 0 && len(v) > max && utf8.RuneCountInString(v) > max {
		return invalid("longer than %d characters", max)
	}
	return nil
}

func isBlank(raw any, version int) bool {
	switch v := raw.(type) {
	case nil:
		return true
	case string:
		return trimFor(v, version) == ""
	}
	return false
}

// Normalized is one value normalized outside any schema.
type Normalized struct {
	Value string
	// Type is the CPF/CNPJ or Pix key type the rule found (taxid from
	// version 3, pix_key from version 2), "" otherwise.
	Type PixKeyType
}

// NormalizeValue applies rule at version to one value, as a field of that
// rule with no options (the DefaultMaxLen limit from version 3 on) would
// be normalized. An error is a *FieldError for the field "value".
func NormalizeValue(rule Rule, version int, raw any) (Normalized, error) {
	if !knownRules[rule] {
		return Normalized{}, fmt.Errorf("%w: unknown rule %q", ErrSchema, rule)
	}
	if version < MinVersion || version > MaxVersion {
		return Normalized{}, fmt.Errorf("%w: version %d (have %d..%d)", ErrUnknownVersion, version, MinVersion, MaxVersion)
	}
	f := &Field{Name: "value", Rule: rule}
	if isBlank(raw, version) {
		return Normalized{}, fieldError(f.Name, errEmpty)
	}
	if err := checkRawLen(raw, f, version); err != nil {
		return Normalized{}, fieldError(f.Name, err)
	}
	v, t, err := rule.normalize(raw, version, f)
	if err == nil {
		err = checkLen(v, f, version)
	}
	if err != nil {
		return Normalized{}, fieldError(f.Name, err)
	}
	return Normalized{Value: v, Type: t}, nil
}
