package restarttest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
)

// Key kinds a run's Pix key is drawn from.
const (
	KindCPF   = "cpf"
	KindCNPJ  = "cnpj"
	KindEmail = "email"
	KindPhone = "phone"
)

var keyKinds = []string{KindCPF, KindCNPJ, KindEmail, KindPhone}

// Template is one phrasing of a billing message. Text holds "{key}" (the
// Pix key with a word saying what it is, e.g. "CPF 529.982.247-25") and
// may hold "{amount}" (the amount due, spelled in one of several ways);
// without it the model takes the amount from the system prompt.
type Template struct {
	Text string `json:"text"`
}

// DefaultTemplates are the built-in phrasings. testdata/restart/messages.jsonl
// holds more, in the format ReadTemplates reads.
func DefaultTemplates() []Template {
	return []Template{
		{"Oi! Quero pagar a fatura. Minha chave Pix é {key}."},
		{"Bom dia, pode cobrar {amount} no pix, chave {key}"},
		{"quero pagar {amount}, chave pix {key}"},
		{"Olá, segue minha chave para o pagamento: {key}. Valor {amount}."},
		{"Pode gerar o pix de {amount}? Chave: {key}"},
		{"pagar a fatura pelo pix, chave {key}, obrigado"},
	}
}

// ReadTemplates reads one JSON object per line ({"text": "..."}); blank
// lines and lines starting with # are skipped. Every template must hold
// "{key}" and a word that asks to pay (the model only charges when asked).
func ReadTemplates(r io.Reader) ([]Template, error) {
	var out []Template
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		var t Template
		if err := json.Unmarshal([]byte(line), &t); err != nil {
			return nil, fmt.Errorf("corpus line %d: %w", n, err)
		}
		if err := t.check(); err != nil {
			return nil, fmt.Errorf("corpus line %d: %w", n, err)
		}
		out = append(out, t)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("corpus has no templates")
	}
	return out, nil
}

// payWords are the words the sandbox model reads as a request to pay.
var payWords = []string{"pagar", "pague", "pagamento", "pago", "quitar", "pay", "pix", "cobra", "acertar"}

func (t Template) check() error {
	if strings.Count(t.Text, "{key}") != 1 {
		return fmt.Errorf("template %q: want exactly one {key}", t.Text)
	}
	if strings.Count(t.Text, "{amount}") > 1 {
		return fmt.Errorf("template %q: at most one {amount}", t.Text)
	}
	lower := strings.ToLower(t.Text)
	for _, w := range payWords {
		if strings.Contains(lower, w) {
			return nil
		}
	}
	return fmt.Errorf("template %q: no word asking to pay (%s)", t.Text, strings.Join(payWords, ", "))
}

// Message is one inbound WhatsApp message of a run.
type Message struct {
	ID   string `json:"id"`
	Text string `json:"text"`
	// Spelling is how the key was written in it.
	Spelling string `json:"spelling"`
}

// RunPlan is one run: one conversation: a customer with one open invoice, and the
// message(s) asking to pay it. All messages of a run are one intent (the
// invoice is the intent_ref): however the key is spelled, one key, one
// charge.
type RunPlan struct {
	Index       int       `json:"index"`
	Scenario    string    `json:"scenario"`
	WaID        string    `json:"wa_id"`
	Customer    string    `json:"customer"`
	Invoice     string    `json:"invoice"`
	AmountCents int64     `json:"amount_cents"`
	KeyKind     string    `json:"key_kind"`
	Key         string    `json:"key"` // the key as derive normalizes it
	Messages    []Message `json:"messages"`
	// Duplicates is how many extra times the first message's webhook is
	// delivered (at once with the first), as WhatsApp redelivers.
	Duplicates int `json:"duplicates"`
	// Concurrent: the messages of a multi-spelling run go out at once
	// rather than one after the other.
	Concurrent bool `json:"concurrent"`
	// RefundScenario, when set, is the refund's crash point (RefundPoints):
	// once paid, RefundCents of the charge are refunded (API Pix).
	RefundScenario string `json:"refund_scenario,omitempty"`
	RefundCents    int64  `json:"refund_cents,omitempty"`
	// E2EID is the paid Pix the refund is made on (known once paid).
	E2EID string `json:"e2eid,omitempty"`
}

// planRuns draws the runs of one test. Everything about them comes from
// rng, so a seed reproduces the plan (the timing of real processes is
// another matter).
func planRuns(rng *rand.Rand, n int, scenarios []string, templates []Template, seed int64) []*RunPlan {
	return planRunsOf(rng, n, scenarios, templates, seed, keyKinds)
}

// planRunsOf is planRuns with the key kinds to draw from.
func planRunsOf(rng *rand.Rand, n int, scenarios []string, templates []Template, seed int64, keyKinds []string) []*RunPlan {
	runs := make([]*RunPlan, n)
	// Scenarios are dealt round-robin over a shuffled order, so that each
	// gets n/len runs and no scenario is always the one short.
	order := rng.Perm(n)
	for i := range runs {
		r := &RunPlan{
			Index:    i,
			Scenario: scenarios[order[i]%len(scenarios)],
			// A valid Brazilian mobile: the reply goes to "+"+wa_id and the
			// reply tool's phone rule validates it.
			WaID:        fmt.Sprintf("55119%08d", 10_000_000+i),
			Customer:    fmt.Sprintf("C-%d-%05d", seed%100000, i),
			Invoice:     fmt.Sprintf("RT-%d-%05d", seed%100000, i),
			AmountCents: amountCents(rng),
			KeyKind:     keyKinds[rng.IntN(len(keyKinds))],
		}
		var spellings []string
		r.Key, spellings = drawKey(rng, r.KeyKind)
		count := 1
		// Item 3 of the issue: the same CPF punctuated and bare, the same
		// phone in three spellings, in separate deliveries of one intent.
		switch {
		case r.KeyKind == KindCPF && rng.IntN(3) == 0:
			count = 2
		case r.KeyKind == KindPhone && rng.IntN(3) == 0:
			count = 3
		}
		for j := 0; j < count; j++ {
			sp := spellings[rng.IntN(len(spellings))]
			if count > 1 {
				sp = spellings[j%len(spellings)] // distinct spellings, in order
			}
			t := templates[rng.IntN(len(templates))]
			text := strings.Replace(t.Text, "{key}", keyLabel(rng, r.KeyKind)+" "+sp, 1)
			text = strings.Replace(text, "{amount}", spellAmount(rng, r.AmountCents), 1)
			r.Messages = append(r.Messages, Message{ID: fmt.Sprintf("wamid.restart-test.%d.%05d.%d", seed, i, j), Text: text, Spelling: sp})
		}
		if rng.IntN(4) == 0 {
			r.Duplicates = 1 + rng.IntN(2)
		}
		r.Concurrent = count > 1 && rng.IntN(2) == 0
		runs[i] = r
	}
	return runs
}

// amountCents is an amount due between R$ 10,00 and R$ 4.999,99, often
// whole reais (as invoices are), sometimes with centavos.
func amountCents(rng *rand.Rand) int64 {
	reais := int64(10 + rng.IntN(4990))
	if rng.IntN(2) == 0 {
		return reais * 100
	}
	return reais*100 + int64(1+rng.IntN(99))
}

// spellAmount writes cents as a customer might: "R$ 1.234,50", "1234,50
// reais", "R$1234.50", "180 reais".
func spellAmount(rng *rand.Rand, cents int64) string {
	reais, c := cents/100, cents%100
	grouped := groupThousands(reais)
	switch rng.IntN(5) {
	case 0:
		return fmt.Sprintf("R$ %s,%02d", grouped, c)
	case 1:
		return fmt.Sprintf("R$%d,%02d", reais, c)
	case 2:
		return fmt.Sprintf("%d,%02d reais", reais, c)
	case 3:
		return fmt.Sprintf("R$ %d.%02d", reais, c)
	default:
		if c == 0 {
			return fmt.Sprintf("%d reais", reais)
		}
		return fmt.Sprintf("R$ %s,%02d", grouped, c)
	}
}

func groupThousands(n int64) string {
	s := fmt.Sprint(n)
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte('.')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// keyLabel is the word before the key. The model needs it for eleven bare
// digits (a CPF or a phone?), and customers write it anyway.
func keyLabel(rng *rand.Rand, kind string) string {
	var labels []string
	switch kind {
	case KindCPF:
		labels = []string{"CPF", "cpf", "o CPF"}
	case KindCNPJ:
		labels = []string{"CNPJ", "cnpj", "o CNPJ"}
	case KindEmail:
		labels = []string{"e-mail", "email", "o e-mail"}
	case KindPhone:
		labels = []string{"celular", "telefone", "cel"}
	}
	return labels[rng.IntN(len(labels))]
}

// drawKey returns a fresh key of kind, as derive normalizes it, and the
// spellings a customer may use for it (the first ones are those item 3
// of the issue names: CPF punctuated then bare; a phone in three forms).
func drawKey(rng *rand.Rand, kind string) (string, []string) {
	switch kind {
	case KindCPF:
		d := cpfDigits(rng)
		return d, []string{d[:3] + "." + d[3:6] + "." + d[6:9] + "-" + d[9:], d, d[:9] + "-" + d[9:]}
	case KindCNPJ:
		d := cnpjDigits(rng)
		return d, []string{d[:2] + "." + d[2:5] + "." + d[5:8] + "/" + d[8:12] + "-" + d[12:], d, d[:8] + "/" + d[8:12] + "-" + d[12:]}
	case KindEmail:
		first := []string{"ana", "bruno", "carla", "diego", "elisa", "fabio", "gabi", "heitor"}[rng.IntN(8)]
		last := []string{"silva", "souza", "oliveira", "lima", "costa", "pereira"}[rng.IntN(6)]
		domain := []string{"exemplo.com.br", "mail.com", "empresa.net"}[rng.IntN(3)]
		e := fmt.Sprintf("%s.%s%d@%s", first, last, rng.IntN(1000), domain)
		local, dom, _ := strings.Cut(e, "@")
		return e, []string{e, strings.ToUpper(e[:1]) + e[1:], local + "@" + strings.ToUpper(dom), strings.ToUpper(e)}
	default: // phone: a Brazilian mobile, 9 then eight digits
		ddd := []string{"11", "21", "31", "41", "48", "51", "61", "71", "81", "85", "91"}[rng.IntN(11)]
		num := fmt.Sprintf("9%d%07d", 6+rng.IntN(4), rng.IntN(10_000_000))
		return "+55" + ddd + num, []string{
			"+55 " + ddd + " " + num[:5] + "-" + num[5:],
			"(" + ddd + ") " + num[:5] + "-" + num[5:],
			ddd + num,
			ddd + " " + num[:5] + "-" + num[5:],
		}
	}
}

// cpfDigits draws a CPF with valid check digits (rule version 2 checks
// them).
func cpfDigits(rng *rand.Rand) string {
	for {
		b := make([]byte, 9, 11)
		for i := range b {
			b[i] = byte('0' + rng.IntN(10))
		}
		b = append(b, checkDigit(b, []int{10, 9, 8, 7, 6, 5, 4, 3, 2}))
		b = append(b, checkDigit(b, []int{11, 10, 9, 8, 7, 6, 5, 4, 3, 2}))
		if strings.Count(string(b), string(b[:1])) != len(b) {
			return string(b)
		}
	}
}

// cnpjDigits draws a headquarters CNPJ (branch 0001) with valid check
// digits.
func cnpjDigits(rng *rand.Rand) string {
	b := make([]byte, 8, 14)
	for i := range b {
		b[i] = byte('0' + rng.IntN(10))
	}
	b = append(b, '0', '0', '0', '1')
	b = append(b, checkDigit(b, []int{5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2}))
	b = append(b, checkDigit(b, []int{6, 5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2}))
	return string(b)
}

// checkDigit is the modulus-11 digit CPF and CNPJ share.
func checkDigit(d []byte, weights []int) byte {
	sum := 0
	for i, w := range weights {
		sum += int(d[i]-'0') * w
	}
	r := sum % 11
	if r < 2 {
		return '0'
	}
	return byte('0' + 11 - r)
}
