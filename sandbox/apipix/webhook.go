package apipix

import (
	"net/http"
	"strings"
)

func (s *Server) putWebhook(w http.ResponseWriter, r *http.Request) {
	var in Webhook
	if _, ok := s.readBody(w, r, &in); !ok {
		return
	}
	if !validURL(in.WebhookURL) || len(r.PathValue("chave")) > 77 {
		writeProblem(w, http.StatusBadRequest, "WebhookOperacaoInvalida", "Webhook inválido.",
			"A presente requisição busca criar um webhook sem respeitar o _schema_ ou, ainda, com sentido semanticamente inválido.",
			Violacao{Razao: "Campo webhook.webhookUrl não respeita o _schema_.", Propriedade: "webhookUrl"})
		return
	}
	s.mu.Lock()
	s.webhooks[r.PathValue("chave")] = WebhookCompleto{WebhookURL: in.WebhookURL, Chave: r.PathValue("chave"), CNPJ: s.cfg.ReceiverCNPJ, Criacao: rfc3339(s.now())}
	s.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

func (s *Server) getWebhook(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	wh, ok := s.webhooks[r.PathValue("chave")]
	s.mu.Unlock()
	if !ok {
		notFound(w, "NaoEncontrado")
		return
	}
	writeJSON(w, http.StatusOK, wh)
}

func (s *Server) deleteWebhook(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	_, ok := s.webhooks[r.PathValue("chave")]
	delete(s.webhooks, r.PathValue("chave"))
	s.mu.Unlock()
	if !ok {
		notFound(w, "NaoEncontrado")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func validURL(u string) bool {
	return strings.HasPrefix(u, "https://") || strings.HasPrefix(u, "http://")
}
