package model

import (
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"strings"

	openai "github.com/sashabaranov/go-openai"
)

// answer is one choice of a completion.
type answer struct {
	msg                                 openai.ChatCompletionMessage
	finish                              openai.FinishReason
	tokens                              int
	wrongAmount, malformed, unknownTool bool
	parallel                            bool
}

// pixFunc is the offered function that charges through Pix, and the names
// of its parameters (pix.charge's, pix.cobranca's Portuguese ones, or
// pix.cob's: the payer's CPF or CNPJ as given is the key, the customer the
// payer's name).
type pixFunc struct {
	name                                string
	customer, amount, key, typ, invoice string
}

var (
	customerNames = []string{"customer_id", "cliente_id", "customer", "cliente", "payer_name"}
	amountNames   = []string{"amount", "valor", "value"}
	keyNames      = []string{"pix_key", "chave_pix_destino", "chave_pix", "chave", "payer_tax_id"}
	typeNames     = []string{"pix_key_type", "tipo_chave", "key_type"}
	invoiceNames  = []string{"invoice", "invoice_id", "invoice_ref", "fatura"}
	unknownNames  = []string{"pix_payment", "charge_pix", "pix_transfer", "pagar_pix", "create_pix_charge"}
)

// answer is one choice, with the forced shapes and parallel calls applied
// to what the billing assistant would say.
func (s *Server) answer(rng *mrand.Rand, req *openai.ChatCompletionRequest, fo forced) answer {
	if fo.refusal {
		return answer{
			msg:    openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Refusal: "I'm sorry, but I can't help with that request."},
			finish: openai.FinishReasonStop,
			tokens: completionTokens(rng, "refusal"),
		}
	}
	a := s.assistant(rng, req, fo)
	switch {
	case fo.contentFilter:
		a.msg.Content, a.msg.ToolCalls, a.finish = "", nil, openai.FinishReasonContentFilter
		return a
	case fo.length:
		// max_tokens reached: the text or the arguments stop mid-way.
		if len(a.msg.ToolCalls) > 0 {
			args := a.msg.ToolCalls[0].Function.Arguments
			a.msg.ToolCalls[0].Function.Arguments = args[:len(args)/2]
		} else {
			a.msg.Content = a.msg.Content[:len(a.msg.Content)/2]
		}
		a.finish = openai.FinishReasonLength
		return a
	}
	if len(a.msg.ToolCalls) == 1 && req.ParallelToolCalls != false && (fo.parallel || (s.cfg.ParallelRate > 0 && rng.Float64() < s.cfg.ParallelRate)) {
		// The same call twice in one message, laid out differently: what
		// a model does when it "makes sure".
		second := a.msg.ToolCalls[0]
		second.ID = "call_" + randID(rng, 24)
		var v map[string]any
		if json.Unmarshal([]byte(second.Function.Arguments), &v) == nil {
			b, _ := json.Marshal(v)
			second.Function.Arguments = string(b)
		}
		a.msg.ToolCalls = append(a.msg.ToolCalls, second)
		a.parallel = true
	}
	return a
}

func (s *Server) assistant(rng *mrand.Rand, req *openai.ChatCompletionRequest, fo forced) answer {
	d := toolDraws{wrong: rng.Float64(), unknown: rng.Float64(), malformed: rng.Float64()}
	// The misreading is chosen from its own stream, so that an answer with
	// a wrong amount spells everything else as it would have.
	d.wrongRNG = mrand.New(mrand.NewPCG(rng.Uint64(), 0))

	msgs := req.Messages
	lastUser, lastTool, roundStart := rounds(msgs)
	facts := gatherFacts(req, lastUser, roundStart)

	if lastTool > lastUser && lastUser >= 0 {
		return reply(rng, finalReply(rng, facts, text(msgs[lastTool])))
	}
	if lastUser < 0 {
		return reply(rng, greeting)
	}

	fn, offered, mustCall := pixFunction(req.Tools, req.ToolChoice)
	if !facts.WantsToPay && !mustCall {
		return reply(rng, greeting)
	}
	if !mustCall {
		if a, ok := askMissing(rng, facts, offered); ok {
			return a
		}
	}
	return s.toolCall(rng, req, fo, fn, facts, d)
}

// toolDraws are the draws of an answer's faults, made before anything
// else of it.
type toolDraws struct {
	wrong, unknown, malformed float64
	wrongRNG                  *mrand.Rand // the misread amount's own stream
}

// rounds finds the last user message, the last tool result, and where
// the round starts: the user messages since the previous tool result,
// what the customer asked for this time.
func rounds(msgs []openai.ChatCompletionMessage) (lastUser, lastTool, roundStart int) {
	lastUser, lastTool = -1, -1
	for i, m := range msgs {
		switch m.Role {
		case openai.ChatMessageRoleUser:
			lastUser = i
		case openai.ChatMessageRoleTool, openai.ChatMessageRoleFunction:
			lastTool = i
		}
	}
	for i := lastUser; i >= 0; i-- {
		if r := msgs[i].Role; r == openai.ChatMessageRoleTool || r == openai.ChatMessageRoleFunction {
			roundStart = i + 1
			break
		}
	}
	return lastUser, lastTool, roundStart
}

// gatherFacts reads what the conversation says: the system prompt's
// facts, the customer (from the prompt, a user message, the request's
// metadata or user), and what this round's user messages ask for.
func gatherFacts(req *openai.ChatCompletionRequest, lastUser, roundStart int) Facts {
	msgs := req.Messages
	var facts Facts
	for _, m := range msgs {
		if m.Role == openai.ChatMessageRoleSystem || m.Role == openai.ChatMessageRoleDeveloper {
			sf := Extract(text(m))
			sf.WantsToPay = false // the prompt describes the job, not a request
			facts = facts.Merge(sf)
		}
	}
	if facts.Customer == "" {
		for _, m := range msgs {
			if m.Role == openai.ChatMessageRoleUser {
				if c := Extract(text(m)).Customer; c != "" {
					facts.Customer = c
				}
			}
		}
	}
	if facts.Customer == "" {
		facts.Customer = req.Metadata["customer_id"]
	}
	if facts.Customer == "" {
		facts.Customer = strings.TrimSpace(req.User)
	}
	if lastUser >= 0 {
		for _, m := range msgs[roundStart : lastUser+1] {
			if m.Role == openai.ChatMessageRoleUser {
				facts = facts.Merge(Extract(text(m)))
			}
		}
	}
	return facts
}

// askMissing asks the customer for what a charge still lacks (or says
// it cannot charge when no Pix function is offered); false when nothing
// is missing.
func askMissing(rng *mrand.Rand, facts Facts, offered bool) (answer, bool) {
	switch {
	case !facts.HasAmount:
		return reply(rng, "Claro! Qual é o valor que você deseja pagar"+invoicePart(facts.Invoice, " da fatura ")+"?"), true
	case facts.PixKey == "":
		return reply(rng, fmt.Sprintf("Para gerar a cobrança de %s, qual é a sua chave Pix (CPF, CNPJ, e-mail, telefone ou chave aleatória)?", FormatBRL(facts.AmountCents))), true
	case facts.Customer == "":
		return reply(rng, "Não encontrei o seu cadastro. Qual é o seu código de cliente?"), true
	case !offered:
		return reply(rng, fmt.Sprintf("Anotei: %s%s pela chave Pix informada. No momento não consigo gerar a cobrança; tente novamente em instantes.",
			FormatBRL(facts.AmountCents), invoicePart(facts.Invoice, ", fatura "))), true
	}
	return answer{}, false
}

// toolCall calls fn with the facts, each spelled one of the ways models
// spell it, with the faults the draws (or the request) ask for.
func (s *Server) toolCall(rng *mrand.Rand, req *openai.ChatCompletionRequest, fo forced, fn pixFunc, facts Facts, d toolDraws) answer {
	a := answer{finish: openai.FinishReasonToolCalls}
	var pairs []argPair
	if facts.Customer != "" {
		c := facts.Customer
		if rng.IntN(10) == 0 {
			c += " " // text fields are trimmed: harmless, and models do it
		}
		pairs = append(pairs, argPair{fn.customer, quote(c)})
	}
	if facts.HasAmount {
		cents := facts.AmountCents
		if fo.wrongAmount || d.wrong < s.cfg.WrongAmountRate {
			cents = wrongAmount(d.wrongRNG, cents, facts.Invoice)
			a.wrongAmount = true
		}
		pairs = append(pairs, argPair{fn.amount, pick(rng, AmountSpellings(cents))})
	}
	if facts.PixKey != "" {
		ks := pick(rng, KeySpellings(facts.PixKeyType, facts.PixKey))
		pairs = append(pairs, argPair{fn.key, quote(ks.Key)})
		if t := pick(rng, ks.Types); t != "" && fn.typ != "" {
			pairs = append(pairs, argPair{fn.typ, quote(t)})
		}
	}
	if facts.Invoice != "" && fn.invoice != "" {
		pairs = append(pairs, argPair{fn.invoice, quote(facts.Invoice)})
	}
	args := writeArgs(rng, pairs)
	name := fn.name
	if fo.unknownTool || d.unknown < s.cfg.UnknownToolRate {
		name = unknownName(rng, req.Tools)
		a.unknownTool = true
	}
	if fo.malformed || d.malformed < s.cfg.MalformedRate {
		args = malform(rng, args)
		a.malformed = true
	}
	a.msg = openai.ChatCompletionMessage{
		Role: openai.ChatMessageRoleAssistant,
		ToolCalls: []openai.ToolCall{{
			ID:       "call_" + randID(rng, 24),
			Type:     openai.ToolTypeFunction,
			Function: openai.FunctionCall{Name: name, Arguments: args},
		}},
	}
	a.tokens = completionTokens(rng, name+args)
	return a
}

const greeting = "Olá! Sou o assistente de cobrança. Para pagar uma fatura, me diga o número da fatura, o valor e a sua chave Pix."

func reply(rng *mrand.Rand, content string) answer {
	return answer{
		msg:    openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: content},
		finish: openai.FinishReasonStop,
		tokens: completionTokens(rng, content),
	}
}

// completionTokens is about a token per four bytes, kept in the 20..60
// range a short billing answer costs.
func completionTokens(rng *mrand.Rand, out string) int {
	return min(60, max(20, len(out)/4+rng.IntN(8)))
}

func pick[T any](rng *mrand.Rand, xs []T) T { return xs[rng.IntN(len(xs))] }

// text is a message's text, whether sent as a string or as parts.
func text(m openai.ChatCompletionMessage) string {
	if m.Content != "" || len(m.MultiContent) == 0 {
		return m.Content
	}
	var b strings.Builder
	for _, p := range m.MultiContent {
		if p.Type == openai.ChatMessagePartTypeText || p.Text != "" {
			b.WriteString(p.Text)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// pixFunction finds the Pix charge function among the offered tools.
// mustCall reports a tool_choice that requires a call ("required", or a
// named function).
func pixFunction(tools []openai.Tool, choice any) (fn pixFunc, offered, mustCall bool) {
	var named string
	switch c := choice.(type) {
	case string:
		if c == "none" {
			return pixFunc{}, false, false
		}
		mustCall = c == "required"
	case map[string]any:
		if f, ok := c["function"].(map[string]any); ok {
			named, _ = f["name"].(string)
			mustCall = named != ""
		}
	}
	var def *openai.FunctionDefinition
	for _, t := range tools {
		if t.Function == nil {
			continue
		}
		n := t.Function.Name
		switch {
		case named != "":
			if n == named {
				def = t.Function
			}
		case n == "pix_charge":
			def = t.Function
		case def == nil && strings.Contains(strings.ToLower(n), "pix"):
			def = t.Function
		}
	}
	fn = pixFunc{name: "pix_charge", customer: customerNames[0], amount: amountNames[0], key: keyNames[0], typ: typeNames[0]}
	if named != "" {
		fn.name = named
	}
	if def == nil {
		return fn, named != "", mustCall
	}
	fn.name = def.Name
	props := properties(def.Parameters)
	if props == nil {
		return fn, true, mustCall
	}
	field := func(names []string, required bool) string {
		for _, n := range names {
			if _, ok := props[n]; ok {
				return n
			}
		}
		if required {
			return names[0] // a model guesses a name rather than leave the value out
		}
		return ""
	}
	fn.customer = field(customerNames, true)
	fn.amount = field(amountNames, true)
	fn.key = field(keyNames, true)
	fn.typ = field(typeNames, false)
	fn.invoice = field(invoiceNames, false)
	return fn, true, mustCall
}

// properties reads the JSON schema's "properties" whatever Go type the
// caller used for it (decoded JSON, json.RawMessage, a struct).
func properties(params any) map[string]any {
	if params == nil {
		return nil
	}
	var raw []byte
	switch p := params.(type) {
	case json.RawMessage:
		raw = p
	case []byte:
		raw = p
	default:
		b, err := json.Marshal(p)
		if err != nil {
			return nil
		}
		raw = b
	}
	var schema struct {
		Properties map[string]any `json:"properties"`
	}
	if json.Unmarshal(raw, &schema) != nil {
		return nil
	}
	return schema.Properties
}

func unknownName(rng *mrand.Rand, tools []openai.Tool) string {
	offered := map[string]bool{}
	for _, t := range tools {
		if t.Function != nil {
			offered[t.Function.Name] = true
		}
	}
	start := rng.IntN(len(unknownNames))
	for i := range unknownNames {
		if n := unknownNames[(start+i)%len(unknownNames)]; !offered[n] {
			return n
		}
	}
	return "pix_charge_v0"
}

// outcome of a tool result, as the customer should hear it.
type outcome int

const (
	outcomeOK outcome = iota
	outcomePending
	outcomeFailed
)

// toolOutcome reads a tool result in the shapes retrysafe and providers
// use: {"status":"completed"|"failed"|"review"|...}, {"error":...}, or a
// bare provider answer ({"status":"paid",...}).
func toolOutcome(content string) (outcome, int64, bool) {
	var v any
	if err := json.Unmarshal([]byte(content), &v); err != nil {
		l := strings.ToLower(content)
		for _, w := range []string{"error", "erro", "fail", "falh", "recus", "denied"} {
			if strings.Contains(l, w) {
				return outcomeFailed, 0, false
			}
		}
		return outcomeOK, 0, false
	}
	out := outcomeOK
	var cents int64
	found := false
	var walk func(v any, depth int)
	walk = func(v any, depth int) {
		m, ok := v.(map[string]any)
		if !ok || depth > 3 {
			return
		}
		if e, ok := m["error"]; ok && e != nil && e != "" && e != false {
			out = outcomeFailed
		}
		if st, ok := m["status"].(string); ok && out != outcomeFailed {
			switch strings.ToLower(st) {
			case "failed", "error", "rejected", "denied", "canceled", "cancelled", "expired":
				out = outcomeFailed
			case "review", "in_flight", "started", "pending", "processing", "uncertain":
				out = outcomePending
			}
		}
		if n, ok := m["amount_cents"].(float64); ok && !found && n >= 0 && n < 1e15 && n == float64(int64(n)) {
			cents, found = int64(n), true
		}
		for _, k := range []string{"response", "result", "data", "charge"} {
			walk(m[k], depth+1)
		}
	}
	walk(v, 0)
	return out, cents, found
}

func finalReply(rng *mrand.Rand, f Facts, toolContent string) string {
	out, cents, ok := toolOutcome(toolContent)
	if !ok {
		cents, ok = f.AmountCents, f.HasAmount
	}
	amount := ""
	if ok {
		amount = " de " + FormatBRL(cents)
	}
	inv := invoicePart(f.Invoice, " da fatura ")
	var templates []string
	switch out {
	case outcomeFailed:
		templates = []string{
			"Não consegui concluir o pagamento%[1]s%[2]s agora. Vou verificar e aviso você por aqui.",
			"Houve um problema ao processar o Pix%[1]s%[2]s. Já estamos verificando.",
		}
	case outcomePending:
		templates = []string{
			"Seu pagamento%[1]s%[2]s está em processamento. Aviso assim que for confirmado.",
			"Recebi o pedido de pagamento%[1]s%[2]s: está em processamento e a confirmação deve chegar em instantes.",
		}
	default:
		templates = []string{
			"Pagamento%[1]s%[2]s confirmado. Obrigado!",
			"Pronto! Recebemos o Pix%[1]s%[2]s. Qualquer dúvida, é só chamar.",
			"Seu pagamento%[1]s%[2]s foi confirmado ✅",
		}
	}
	return fmt.Sprintf(pick(rng, templates), amount, inv)
}

func invoicePart(invoice, prefix string) string {
	if invoice == "" {
		return ""
	}
	return prefix + invoice
}

// FormatBRL writes centavos as Brazilians read them: "R$ 1.800,00".
func FormatBRL(cents int64) string {
	sign := ""
	if cents < 0 {
		sign, cents = "-", -cents
	}
	return fmt.Sprintf("%sR$ %s,%s", sign, groupThousands(fmt.Sprint(cents/100)), twoDigits(cents%100))
}
