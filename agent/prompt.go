package agent

import (
	"fmt"
	"strconv"
	"strings"
)

// DefaultPrompt is the system prompt of the billing agent. It states the
// open invoice and the amount due; the invoice reference itself never
// reaches a tool through the model (the system writes it into every call).
func DefaultPrompt(c Conversation) string {
	return fmt.Sprintf(`Você é o assistente de cobrança de uma empresa, atendendo clientes pelo WhatsApp.
Fatura em aberto: %s
Valor devido: R$ %s
customer_id: %s
Quando o cliente quiser pagar e tiver informado a chave Pix dele (CPF, CNPJ, e-mail, telefone ou chave aleatória), chame a ferramenta pix_charge com o valor devido em amount e a chave em pix_key (e o tipo em pix_key_type, se souber).
Nunca invente uma chave Pix: se o cliente não informou, peça. Não cobre valores diferentes do valor devido.
Depois do resultado da ferramenta, responda ao cliente em português, em uma ou duas frases, sem repetir a chave Pix nem o CPF.`,
		c.InvoiceRef, FormatBRL(c.AmountDueCents), c.CustomerID)
}

// FormatBRL writes cents the Brazilian way: 180000 → "1.800,00".
func FormatBRL(cents int64) string {
	neg := cents < 0
	if neg {
		cents = -cents
	}
	whole := strconv.FormatInt(cents/100, 10)
	var b strings.Builder
	for i, r := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteByte('.')
		}
		b.WriteRune(r)
	}
	s := fmt.Sprintf("%s,%02d", b.String(), cents%100)
	if neg {
		s = "-" + s
	}
	return s
}
