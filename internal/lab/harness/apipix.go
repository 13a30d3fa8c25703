package harness

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/retrysafe/retrysafe/webhook"
)

// PSP flavours (StackConfig.PSPFlavour).
const (
	PSPV1     = "v1"
	PSPAPIPix = "apipix"
)

// The API Pix sandbox's credentials and the receiver's key in a stack.
const (
	APIPixClientID     = "harness-client"
	APIPixClientSecret = "harness-client-secret-0123"
	APIPixChave        = "7d9f0335-8dcc-4054-9bf9-0dbd61d36906"
	// APIPixProvider is the {provider} of the Pix callback path.
	APIPixProvider = "sandbox"
)

func (s *Stack) pixHookSecret() string { return "pixhook_" + s.Cfg.HMACKey }

// apipixPSPArgs start `sandbox psp --flavour apipix` with its callback
// pointed at the server, authenticated by the query-string token.
func (s *Stack) apipixPSPArgs() []string {
	url := "http://" + s.serveAddr + webhook.PixPathPrefix + APIPixProvider +
		"?hmac=" + webhook.PixURLToken(s.pixHookSecret(), APIPixProvider) + "&ignorar="
	return []string{"sandbox", "psp", "--flavour", "apipix", "--addr", "127.0.0.1:0",
		"--client-id", APIPixClientID, "--client-secret", APIPixClientSecret,
		"--webhook-url", url, "--webhook-backoff", "200ms"}
}

// apipixEnv configures pix.cob, pix.refund and the Pix callback.
func (s *Stack) apipixEnv() []string {
	return []string{
		"RETRYSAFE_APIPIX_URL=" + s.PSP.Ready + "/api",
		"RETRYSAFE_APIPIX_CLIENT_ID=" + APIPixClientID,
		"RETRYSAFE_APIPIX_CLIENT_SECRET=" + APIPixClientSecret,
		"RETRYSAFE_APIPIX_CHAVE=" + APIPixChave,
		"RETRYSAFE_PIX_WEBHOOK_SECRETS=" + APIPixProvider + "=" + s.pixHookSecret(),
		"RETRYSAFE_PIX_WEBHOOK_TENANTS=" + APIPixProvider + "=" + s.Cfg.Tenant,
	}
}

// Cob is a charge as the API Pix sandbox lists it.
type Cob struct {
	TxID    string `json:"txid"`
	Revisao int    `json:"revisao"`
	Status  string `json:"status"`
	// SolicitacaoPagador: pix.cob sends the intent_ref unless told otherwise.
	SolicitacaoPagador string `json:"solicitacaoPagador"`
	Valor              struct {
		Original string `json:"original"`
	} `json:"valor"`
	Pix []struct {
		EndToEndID string `json:"endToEndId"`
		Valor      string `json:"valor"`
		Devolucoes []struct {
			ID     string `json:"id"`
			Valor  string `json:"valor"`
			Status string `json:"status"`
		} `json:"devolucoes"`
	} `json:"pix"`
}

// Cobs lists the API Pix sandbox's charges.
func (s *Stack) Cobs(ctx context.Context) ([]Cob, error) {
	var out struct{ Data []Cob }
	err := s.getJSON(ctx, s.PSP.Ready+"/sandbox/cobs", "", &out)
	return out.Data, err
}

// PixStats are the API Pix sandbox's counters (see sandbox/apipix.Stats).
func (s *Stack) PixStats(ctx context.Context) (map[string]int, error) {
	var out map[string]int
	err := s.getJSON(ctx, s.PSP.Ready+"/sandbox/stats", "", &out)
	return out, err
}

// Pay makes the customer pay charge txid at the API Pix sandbox.
func (s *Stack) Pay(ctx context.Context, txid string) error {
	return s.postEmpty(ctx, s.PSP.Ready+"/sandbox/cob/"+txid+"/pagar", http.StatusCreated)
}

// RedeliverPix makes the API Pix sandbox notify a Pix again.
func (s *Stack) RedeliverPix(ctx context.Context, e2eid string) error {
	return s.postEmpty(ctx, s.PSP.Ready+"/sandbox/pix/"+e2eid+"/reenviar", http.StatusAccepted)
}

func (s *Stack) postEmpty(ctx context.Context, url string, want int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		return err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("POST %s: %s: %s", url, resp.Status, b)
	}
	return nil
}
